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
  if (kind == "rbd") {
#ifdef GPUIO_HAVE_RBD
    return detail::make_rbd_backend(paths, opts);
#else
    throw std::invalid_argument("backend 'rbd' is not built: librbd was not found when gpuio was configured "
                                "(install librbd-dev and librados-dev, then rebuild)");
#endif
  }
  throw std::invalid_argument("unknown backend '" + kind + "': expected uring, posix, sim, rbd or fault:<backend>");
}

std::vector<uint32_t> IoBackend::open_devices(const std::vector<std::string>&, const DeviceOpenOptions&) {
  throw std::invalid_argument(std::string("backend '") + name() +
                              "' takes its devices when it is created; files are opened later only on uring and posix");
}

void IoBackend::close_devices(const std::vector<uint32_t>&) {
  throw std::invalid_argument(std::string("backend '") + name() + "' cannot close a device before it ends");
}

bool rbd_built() {
#ifdef GPUIO_HAVE_RBD
  return true;
#else
  return false;
#endif
}

}  // namespace gpuio
