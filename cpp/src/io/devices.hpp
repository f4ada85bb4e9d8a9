// Opened devices shared by the file-descriptor backends (uring, posix). Owned by the backend. Devices given at
// creation take indices 0..n-1 and stay open until the backend ends; open() adds more while queues run (an
// engine's later targets) and close() ends them. A slot is written only while no request can name it (before
// open() returns its index, after close() was told none is in flight), so queues on any thread read fd() and info()
// without locks; slots live in fixed chunks that never move.
#pragma once
#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpuio/io.hpp"
#include "gpuio/limits.hpp"

namespace gpuio::detail {

class DeviceSet {
 public:
  // Throws IoError naming the path: unreadable, O_DIRECT unsupported (suggesting direct=False), ... paths may be
  // empty (a backend whose devices all come through open()).
  DeviceSet(const std::vector<std::string>& paths, const BackendOptions& opts);
  ~DeviceSet();
  DeviceSet(const DeviceSet&) = delete;
  DeviceSet& operator=(const DeviceSet&) = delete;

  // Open more devices; all or none (IoError naming the path). std::length_error past limits::open_devices_max.
  std::vector<uint32_t> open(const std::vector<std::string>& paths, const DeviceOpenOptions& opts);
  void close(const std::vector<uint32_t>& indices);

  size_t size() const { return size_.load(std::memory_order_acquire); }  // highest index in use + 1
  size_t initial() const { return initial_; }  // opened at creation: indices [0, initial())
  std::vector<int> initial_fds() const;
  int fd(size_t i) const { return slot(i).fd; }
  // One read of len bytes at offset into buf on the calling thread, whole or failed: bytes read (short only at the
  // device's end), or -errno. A direct device's range that the page cache holds whole (cachestat, Linux 6.5+) is
  // copied from the cache through a second, buffered descriptor (*cached set): an O_DIRECT read would go to the
  // device for bytes already in memory. Else buf must suit O_DIRECT (the caller checks its alignment).
  int64_t read_now(size_t i, void* buf, uint32_t len, uint64_t offset, bool* cached) const;
  const DeviceInfo& info(size_t i) const { return slot(i).info; }
  void sync() const;  // fdatasync every open device; throws IoError naming the device
  void sync(const std::vector<uint32_t>& indices) const;

 private:
  struct Slot {
    int fd = -1;
    int cached_fd = -1;  // direct devices: the same file without O_DIRECT (read_now's page-cache copies), or -1
    int locked_by = 0;   // the pid that holds fd's flock, or 0: only that process unlocks it (never a fork's child)
    DeviceInfo info;
  };
  static void end(Slot& s);  // unlocks (when this process locked it), then closes its descriptors
  static constexpr size_t chunk_slots = 64;
  const Slot& slot(size_t i) const { return chunks_[i / chunk_slots].load(std::memory_order_acquire)[i % chunk_slots]; }
  Slot& slot_mut(size_t i);  // allocates its chunk; under mu_

  std::array<std::atomic<Slot*>, limits::open_devices_max / chunk_slots> chunks_{};
  std::atomic<size_t> size_{0};
  size_t initial_ = 0;
  mutable std::mutex mu_;       // open/close/sync against each other
  std::vector<uint32_t> free_;  // closed indices, reused first
};

// What the file-descriptor backends (uring, posix) have alike: their devices are a DeviceSet, opened and closed
// while queues run, synced and read on the calling thread the same way. They differ only in their queues.
class FdBackend : public IoBackend {
 public:
  FdBackend(const std::vector<std::string>& paths, const BackendOptions& o) : devs_(paths, o) {}
  size_t device_count() const override { return devs_.size(); }
  const DeviceInfo& device(size_t i) const override { return devs_.info(i); }
  void sync() override { devs_.sync(); }
  bool opens_devices() const override { return true; }
  std::vector<uint32_t> open_devices(const std::vector<std::string>& paths, const DeviceOpenOptions& o) override {
    return devs_.open(paths, o);
  }
  void close_devices(const std::vector<uint32_t>& devices) override { devs_.close(devices); }
  void sync_devices(const std::vector<uint32_t>& devices) override { devs_.sync(devices); }
  int64_t read_now(uint32_t device, void* buf, uint32_t len, uint64_t offset, bool* cached) override {
    return devs_.read_now(device, buf, len, offset, cached);
  }

 protected:
  // describe()'s common start: "<name> direct=on|off|per-file"
  std::string describe_devices() const {
    return std::string(name()) + " direct=" + (devs_.initial() == 0 ? "per-file" : devs_.info(0).direct ? "on" : "off");
  }
  DeviceSet devs_;
};

}  // namespace gpuio::detail
