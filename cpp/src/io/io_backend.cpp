// IoBackend's out-of-line defaults. open_devices() is the class's key function, so its vtable and typeinfo
// are emitted here: this file is compiled into libgpuio and into libgpuio_rbd.so.1 (whose RbdBackend derives
// from IoBackend and may not reach libgpuio's hidden copy).
#include <stdexcept>
#include <string>
#include <vector>

#include "gpuio/io.hpp"

namespace gpuio {

std::vector<uint32_t> IoBackend::open_devices(const std::vector<std::string>&, const DeviceOpenOptions&) {
  throw std::invalid_argument(std::string("backend '") + name() +
                              "' takes its devices when it is created; files are opened later only on uring and posix");
}

void IoBackend::close_devices(const std::vector<uint32_t>&) {
  throw std::invalid_argument(std::string("backend '") + name() + "' cannot close a device before it ends");
}

}  // namespace gpuio
