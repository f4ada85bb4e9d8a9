// How C++ errors cross into Python for every gpuio extension module (gpuio._core, gpuio_apps._raw): IoError keeps its
// errno, so Python sees OSError(errno, message) and callers can test e.errno. nanobind's own translations cover
// std::invalid_argument (ValueError), std::out_of_range (IndexError) and the rest.
#pragma once
#include <nanobind/nanobind.h>

#include <exception>

#include "gpuio/status.hpp"

namespace gpuio::bindings {

inline void register_io_error_translator() {
  namespace nb = nanobind;
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const gpuio::IoError& e) {
      nb::object err = nb::module_::import_("builtins").attr("OSError")(e.error_code(), e.what());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())), err.ptr());
    }
  });
}

}  // namespace gpuio::bindings
