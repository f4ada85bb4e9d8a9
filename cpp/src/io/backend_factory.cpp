#include <stdexcept>
#include <string>
#include <vector>

#include "gpuio/status.hpp"
#include "io/backends.hpp"

namespace gpuio {

std::unique_ptr<IoBackend> make_backend(const std::vector<std::string>& paths, const BackendOptions& opts) {
  const std::string& kind = opts.kind;
  if (kind.rfind("fault:", 0) == 0) {
    BackendOptions inner = opts;
    inner.kind = kind.substr(6);
    GPUIO_EXPECT(inner.kind.rfind("fault", 0) != 0, "backend '" + kind + "': a fault backend cannot wrap another");
    return detail::make_fault_backend(make_backend(paths, inner), opts.fault);
  }
  if (kind == "uring") return detail::make_uring_backend(paths, opts);
  if (kind == "posix") return detail::make_posix_backend(paths, opts);
  if (kind == "sim") return detail::make_sim_backend(paths, opts);
  if (kind == "rbd") return detail::make_rbd_backend(paths, opts);  // loads libgpuio_rbd.so.1 (io/rbd.hpp)
  throw std::invalid_argument("unknown backend '" + kind + "': expected uring, posix, sim, rbd or fault:<backend>");
}

bool rbd_built() {
#ifdef GPUIO_HAVE_RBD
  return true;
#else
  return false;
#endif
}

}  // namespace gpuio
