// Opened devices shared by the file-descriptor backends (uring, posix). Owned by the backend; fds are
// read-only after construction, so queues on any thread may use them.
#pragma once
#include <string>
#include <vector>

#include "gpuio/io.hpp"

namespace gpuio::detail {

class DeviceSet {
 public:
  // Throws IoError naming the path: unreadable, O_DIRECT unsupported (suggesting direct=False), ...
  DeviceSet(const std::vector<std::string>& paths, const BackendOptions& opts);
  ~DeviceSet();
  DeviceSet(const DeviceSet&) = delete;
  DeviceSet& operator=(const DeviceSet&) = delete;

  size_t size() const { return infos_.size(); }
  int fd(size_t i) const { return fds_[i]; }
  const std::vector<int>& fds() const { return fds_; }
  const DeviceInfo& info(size_t i) const { return infos_[i]; }
  void sync() const;  // fdatasync every device; throws IoError naming the device

 private:
  std::vector<int> fds_;
  std::vector<DeviceInfo> infos_;
};

}  // namespace gpuio::detail
