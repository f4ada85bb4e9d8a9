#include <algorithm>
#include <string>
#include <vector>

#include "bindings/errors.hpp"
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

void register_exception_translators(nb::module_& m) { register_io_error_translator(); }

}  // namespace gpuio::bindings

NB_MODULE(_core, m) {
  using namespace gpuio::bindings;
  // The process engine lives in a module global until the interpreter ends (its workers are stopped by an atexit
  // handler first): nanobind's report of instances still alive at shutdown would print on every DataLoader
  // worker's exit and say nothing useful.
  nb::set_leak_warnings(false);
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
