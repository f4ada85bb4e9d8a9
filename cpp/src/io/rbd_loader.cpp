// libgpuio's side of the rbd backend (see io/rbd.hpp): the one dlopen() of
// libgpuio_rbd.so.1, done the first time a volume is asked for and kept for the life of the process (librados
// keeps threads of its own; it is never unloaded).
// Where the plugin is looked for: GPUIO_RBD_LIBRARY when set; else beside the object this code is linked
// into (gpuio/_core*.so: an installed wheel and the editable install put libgpuio_rbd.so.1 next to it); else
// by name through the loader's search path (the GoogleTest binary's RUNPATH names the build folder).
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <stdexcept>

#include "gpuio/status.hpp"
#include "io/backends.hpp"
#include "io/rbd.hpp"

namespace gpuio {
namespace rbd {
namespace {

constexpr const char* kPluginName = "libgpuio_rbd.so.1";
constexpr const char* kCephHint =
    ": install librbd1 and librados2 (Debian/Ubuntu: apt-get install ceph-common) to use volumes";

struct Plugin {
  std::string error;  // empty when loaded
  gpuio_rbd_make_backend_fn make_backend = nullptr;
  gpuio_rbd_connect_fn connect = nullptr;
};

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The plugin beside the shared object (or executable) that holds this function.
std::string beside_this_object() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&beside_this_object), &info) == 0 || !info.dli_fname) return "";
  std::string self = info.dli_fname;
  size_t slash = self.rfind('/');
  if (slash == std::string::npos) return "";
  std::string path = self.substr(0, slash + 1) + kPluginName;
  return exists(path) ? path : "";
}

Plugin load() {
  Plugin p;
#ifndef GPUIO_HAVE_RBD
  p.error = "volumes are unavailable: this gpuio was built without the rbd backend (librbd-dev and "
            "librados-dev were absent when it was configured: install them and rebuild)";
  return p;
#else
  const char* env = std::getenv("GPUIO_RBD_LIBRARY");
  const bool from_env = env && *env;
  std::string path = from_env ? env : beside_this_object();
  if (path.empty()) path = kPluginName;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    std::string text = why ? why : "dlopen failed";
    // The plugin present but not loadable: one of its libraries (librbd.so.1, librados.so.2) is missing.
    bool plugin_found = path.find('/') == std::string::npos ? text.find(kPluginName) == std::string::npos
                                                            : exists(path);
    std::string hint = kCephHint;
    if (!plugin_found) {
      hint = from_env ? std::string(" (set by GPUIO_RBD_LIBRARY)")
                      : std::string(" (") + kPluginName + " is missing from this install of gpuio)";
    }
    p.error = "volumes are unavailable: " + text + hint;
    return p;
  }
  auto abi = reinterpret_cast<gpuio_rbd_abi_fn>(dlsym(handle, "gpuio_rbd_abi"));
  p.make_backend = reinterpret_cast<gpuio_rbd_make_backend_fn>(dlsym(handle, "gpuio_rbd_make_backend"));
  p.connect = reinterpret_cast<gpuio_rbd_connect_fn>(dlsym(handle, "gpuio_rbd_connect"));
  if (!abi || !p.make_backend || !p.connect) {
    p.error = "volumes are unavailable: " + path + " lacks gpuio's rbd entry points (not gpuio's plugin)";
  } else if (plugin_abi() != abi()) {
    p.error = "volumes are unavailable: " + path + " is from another gpuio build (layout " + abi() +
              ", this build " + plugin_abi() + "): reinstall gpuio";
  }
  if (!p.error.empty()) {
    p.make_backend = nullptr;
    p.connect = nullptr;
  }
  return p;
#endif
}

const Plugin& plugin() {
  static const Plugin p = load();
  return p;
}

// The loaded plugin, or the reason it is not there as an exception: std::invalid_argument (ValueError) when
// this build has no rbd backend, as for an unknown backend name; std::runtime_error when it cannot load here.
const Plugin& loaded() {
#ifndef GPUIO_HAVE_RBD
  throw std::invalid_argument("backend 'rbd' is not built: librbd was not found when gpuio was configured "
                              "(install librbd-dev and librados-dev, then rebuild)");
#else
  const Plugin& p = plugin();
  if (!p.error.empty()) throw std::runtime_error(p.error);
  return p;
#endif
}

}  // namespace

std::unique_ptr<Client> connect(const RbdOptions& o) { return std::unique_ptr<Client>(loaded().connect(o)); }

std::string unavailable() { return plugin().error; }

}  // namespace rbd

namespace detail {

std::unique_ptr<IoBackend> make_rbd_backend(const std::vector<std::string>& paths, const BackendOptions& o) {
  return std::unique_ptr<IoBackend>(rbd::loaded().make_backend(paths, o));
}

}  // namespace detail
}  // namespace gpuio
