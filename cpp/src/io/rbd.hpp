// Ceph volumes without Ceph at link time. The rbd backend and the librados client live in their own shared
// object, libgpuio_rbd.so.1 (io/rbd_backend.cpp, io/rbd_client.cpp, io/rbd_plugin.cpp), the only part of gpuio
// that needs librbd.so.1 and librados.so.2. libgpuio loads it with dlopen() the first time a volume is opened
// (io/rbd_loader.cpp), so gpuio imports and runs its other backends on a host without the Ceph libraries, and
// asking for a volume there fails with one line naming the missing library and the package that brings it.
// This header includes no Ceph header: volume names and the client's interface are plain C++.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpuio/io.hpp"

namespace gpuio::rbd {

// "rbd:POOL/IMAGE" or "rbd:POOL/NAMESPACE/IMAGE" (the prefix is optional).
struct Spec {
  std::string pool, ns, image;
  static Spec parse(const std::string& text);  // throws std::invalid_argument naming the text
  std::string str() const;                     // "rbd:pool/ns/image" (no ns part when empty)
};

struct MonReply {
  int rc = 0;
  std::string out;     // the command's output (JSON when format=json was asked)
  std::string status;  // the mon's status line (error text)
};

struct VolumeInfo {
  uint64_t bytes = 0;
  uint64_t object_bytes = 0;
  std::string object_prefix;  // objects are object_prefix + "." + 16 hex digits of the object number
  uint64_t features = 0;
};

// A connected librados client (one cephx identity) and the volume operations gpuio needs beside the data
// path: create/resize/remove/list volumes, their layout, lock owners, mon commands. Every failure throws
// IoError with the errno and names the volume and the client. Thread-safe as librados is.
class Client {
 public:
  virtual ~Client() = default;
  virtual const std::string& name() const = 0;  // "client.admin"
  virtual uint64_t instance_id() const = 0;     // this client's RADOS instance (lock owner id)
  virtual std::string address() const = 0;      // as it appears in the blocklist
  virtual MonReply mon_command(const std::string& json) const = 0;

  // Volumes. Names in errors are Spec::str().
  virtual void create(const Spec& s, uint64_t bytes, uint64_t object_bytes) const = 0;
  virtual void resize(const Spec& s, uint64_t bytes) const = 0;
  virtual void remove(const Spec& s) const = 0;
  virtual std::vector<std::string> list(const std::string& pool, const std::string& ns) const = 0;
  virtual VolumeInfo info(const Spec& s) const = 0;
  virtual void create_namespace(const std::string& pool, const std::string& ns) const = 0;  // no-op when it exists
  // Current exclusive-lock owners ("auto <id>" strings as librbd names them).
  virtual std::vector<std::string> lock_owners(const Spec& s) const = 0;
  // Break the exclusive lock of every owner; the owners are blocklisted (their later writes are refused).
  virtual int break_locks(const Spec& s) const = 0;  // how many were broken
  // "volume 'rbd:p/img' (client.x)" for error texts.
  std::string who(const Spec& s) const { return "volume '" + s.str() + "' (" + name() + ")"; }
};

// Connects a client (loading libgpuio_rbd.so.1 on first use). Throws IoError (EACCES/EPERM: PermissionError)
// when the cluster refuses, std::runtime_error with rbd_unavailable()'s text when the backend cannot load,
// std::invalid_argument when this build has no rbd backend.
std::unique_ptr<Client> connect(const RbdOptions& o);

// Why volumes cannot be used in this process, or "" when libgpuio_rbd.so.1 loaded. Loads it on first call.
// Environment override, read here once per process: GPUIO_RBD_LIBRARY=<path of libgpuio_rbd.so.1> (tests
// point it at a missing file or a copy whose Ceph dependency is renamed, to see the host without Ceph).
std::string unavailable();

// Checked by the loader against the plugin's own answer, so a libgpuio_rbd.so.1 of another build (other
// struct layouts) is refused by name instead of crashing.
inline std::string plugin_abi() {
  return "gpuio-rbd-1:" + std::to_string(sizeof(BackendOptions)) + ":" + std::to_string(sizeof(RbdOptions)) + ":" +
         std::to_string(sizeof(DeviceInfo)) + ":" + std::to_string(sizeof(Spec));
}

}  // namespace gpuio::rbd

// The plugin's entry points (io/rbd_plugin.cpp), looked up by name with dlsym. They throw like the
// functions they stand for; the objects they return are deleted through their virtual destructors.
extern "C" {
using gpuio_rbd_abi_fn = const char* (*)();
using gpuio_rbd_make_backend_fn = gpuio::IoBackend* (*)(const std::vector<std::string>& paths,
                                                        const gpuio::BackendOptions& o);
using gpuio_rbd_connect_fn = gpuio::rbd::Client* (*)(const gpuio::RbdOptions& o);
}
