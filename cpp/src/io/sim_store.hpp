// Data of one emulated SSD: sparse memory (1 MiB chunks allocated on first write, zeros until then) or a
// backing file. Thread-safe for concurrent requests on different bytes; overlapping concurrent requests get
// what a real device gives (no ordering), which is the caller's business.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace gpuio::detail {

class SimStore {
 public:
  // path empty: memory. Else the file is created (sparse, bytes long) or reused. Throws IoError naming it.
  SimStore(uint64_t bytes, const std::string& path);
  ~SimStore();
  SimStore(const SimStore&) = delete;
  SimStore& operator=(const SimStore&) = delete;
  // Returns bytes moved or -errno. Callers have checked offset + len <= bytes.
  int32_t read(void* dst, uint64_t offset, uint32_t len) const;
  int32_t write(const void* src, uint64_t offset, uint32_t len);
  uint64_t bytes() const { return bytes_; }
  void sync();  // backing file: fsync (throws IoError); memory: nothing to do

 private:
  static constexpr uint64_t kChunk = 1ull << 20;
  char* chunk(uint64_t i, bool create) const;
  uint64_t bytes_;
  int fd_ = -1;
  std::unique_ptr<std::atomic<char*>[]> chunks_;
  uint64_t nchunks_ = 0;
};

}  // namespace gpuio::detail
