// A librados client (one cephx identity) and the RBD volume operations gpuio needs beside the data path:
// create/resize/remove/list volumes, their layout (object names), lock owners, and mon commands (caps,
// placement). Compiled only when librbd is found (GPUIO_HAVE_RBD). Every failure throws IoError with the
// errno and names the volume and the client.
#pragma once
#include <rados/librados.h>
#include <rbd/librbd.h>

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

class Client {
 public:
  explicit Client(const RbdOptions& o);  // connects; throws IoError (EACCES/EPERM: PermissionError)
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  rados_t handle() const { return cluster_; }
  const std::string& name() const { return name_; }  // "client.admin"
  uint64_t instance_id() const;                       // this client's RADOS instance (lock owner id)
  std::string address() const;                        // as it appears in the blocklist

  // An I/O context on pool (and namespace); the caller destroys it. Throws IoError naming the pool.
  rados_ioctx_t open_ioctx(const Spec& s) const;
  MonReply mon_command(const std::string& json) const;

  // Volumes. Names in errors are Spec::str().
  void create(const Spec& s, uint64_t bytes, uint64_t object_bytes) const;
  void resize(const Spec& s, uint64_t bytes) const;
  void remove(const Spec& s) const;
  std::vector<std::string> list(const std::string& pool, const std::string& ns) const;
  VolumeInfo info(const Spec& s) const;
  void create_namespace(const std::string& pool, const std::string& ns) const;  // no-op when it exists
  // Current exclusive-lock owners ("auto <id>" strings as librbd names them).
  std::vector<std::string> lock_owners(const Spec& s) const;
  // Break the exclusive lock of every owner; the owners are blocklisted (their later writes are refused).
  int break_locks(const Spec& s) const;  // how many were broken

  // "volume 'rbd:p/img' (client.x)" for error texts.
  std::string who(const Spec& s) const;

 private:
  rados_t cluster_ = nullptr;
  std::string name_;
};

// Throws IoError(-rc) with "<what> <volume> as <client>: <errno name>" and a hint for EPERM/EACCES/ENOENT.
[[noreturn]] void fail(int rc, const std::string& what, const std::string& who);

// Opens an image of an ioctx (read-only or not); the caller closes it. Throws IoError naming the volume.
rbd_image_t open_image(rados_ioctx_t io, const Spec& s, bool read_only, const std::string& who);

}  // namespace gpuio::rbd
