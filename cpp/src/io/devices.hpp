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
  const DeviceInfo& info(size_t i) const { return slot(i).info; }
  void sync() const;  // fdatasync every open device; throws IoError naming the device
  void sync(const std::vector<uint32_t>& indices) const;

 private:
  struct Slot {
    int fd = -1;
    DeviceInfo info;
  };
  static constexpr size_t chunk_slots = 64;
  const Slot& slot(size_t i) const { return chunks_[i / chunk_slots].load(std::memory_order_acquire)[i % chunk_slots]; }
  Slot& slot_mut(size_t i);  // allocates its chunk; under mu_

  std::array<std::atomic<Slot*>, limits::open_devices_max / chunk_slots> chunks_{};
  std::atomic<size_t> size_{0};
  size_t initial_ = 0;
  mutable std::mutex mu_;       // open/close/sync against each other
  std::vector<uint32_t> free_;  // closed indices, reused first
};

}  // namespace gpuio::detail
