#include <algorithm>
#include <string>
#include <vector>

#include "bindings/registry.hpp"
#include "gpuio/status.hpp"

namespace nb = nanobind;

namespace gpuio::bindings {
namespace {
struct Entry {
  const char* name;
  int order;
  BindFn fn;
};
std::vector<Entry>& entries() {
  static std::vector<Entry> e;
  return e;
}
}  // namespace

Registrar::Registrar(const char* name, int order, BindFn fn) { entries().push_back({name, order, fn}); }

void register_exception_translators(nb::module_& m) {
  // IoError keeps its errno: Python sees OSError(errno, message), so callers can test e.errno.
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

NB_MODULE(_core, m) {
  using namespace gpuio::bindings;
  register_exception_translators(m);
  auto& e = entries();
  std::sort(e.begin(), e.end(), [](const Entry& a, const Entry& b) { return a.order < b.order; });
  for (const Entry& entry : e) entry.fn(m);
#ifdef GPUIO_HAVE_CUDA
  m.attr("cuda_built") = true;
#else
  m.attr("cuda_built") = false;
#endif
}
