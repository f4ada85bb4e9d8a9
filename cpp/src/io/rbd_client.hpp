// The librados client behind rbd::Client (io/rbd.hpp), inside libgpuio_rbd.so.1 only: the one place besides
// io/rbd_backend.cpp that includes the Ceph headers. Every failure throws IoError with the errno and names
// the volume and the client.
#pragma once
#include <rados/librados.h>
#include <rbd/librbd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpuio/io.hpp"
#include "io/rbd.hpp"

namespace gpuio::rbd {

class RadosClient final : public Client {
 public:
  explicit RadosClient(const RbdOptions& o);  // connects; throws IoError (EACCES/EPERM: PermissionError)
  ~RadosClient() override;
  RadosClient(const RadosClient&) = delete;
  RadosClient& operator=(const RadosClient&) = delete;

  rados_t handle() const { return cluster_; }
  const std::string& name() const override { return name_; }
  uint64_t instance_id() const override;
  std::string address() const override;
  MonReply mon_command(const std::string& json) const override;

  // An I/O context on pool (and namespace); the caller destroys it. Throws IoError naming the pool.
  rados_ioctx_t open_ioctx(const Spec& s) const;

  void create(const Spec& s, uint64_t bytes, uint64_t object_bytes) const override;
  void resize(const Spec& s, uint64_t bytes) const override;
  void remove(const Spec& s) const override;
  std::vector<std::string> list(const std::string& pool, const std::string& ns) const override;
  VolumeInfo info(const Spec& s) const override;
  void create_namespace(const std::string& pool, const std::string& ns) const override;
  std::vector<std::string> lock_owners(const Spec& s) const override;
  int break_locks(const Spec& s) const override;

 private:
  rados_t cluster_ = nullptr;
  std::string name_;
};

// Throws IoError(-rc) with "<what> <volume> as <client>: <errno name>" and a hint for EPERM/EACCES/ENOENT.
[[noreturn]] void fail(int rc, const std::string& what, const std::string& who);

// Opens an image of an ioctx (read-only or not); the caller closes it. Throws IoError naming the volume.
rbd_image_t open_image(rados_ioctx_t io, const Spec& s, bool read_only, const std::string& who);

}  // namespace gpuio::rbd
