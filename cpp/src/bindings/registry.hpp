// Each layer binds itself from its own file: a static Registrar adds a function that module.cpp calls
// when gpuio._core is imported, so adding a layer's bindings needs no edit of a shared file.
#pragma once
#include <nanobind/nanobind.h>

namespace gpuio::bindings {

using BindFn = void (*)(nanobind::module_&);

struct Registrar {
  Registrar(const char* name, int order, BindFn fn);
};

// Translate a C++ exception to the right Python type; shared by every binding file.
void register_exception_translators(nanobind::module_& m);

}  // namespace gpuio::bindings

#define GPUIO_BIND(name, order) \
  static void gpuio_bind_##name(nanobind::module_& m); \
  static ::gpuio::bindings::Registrar gpuio_registrar_##name(#name, order, &gpuio_bind_##name); \
  static void gpuio_bind_##name(nanobind::module_& m)
