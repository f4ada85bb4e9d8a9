// Helpers shared by the C++ tests: files with known contents under GPUIO_TEST_DIR, and the small-limits
// engine configuration that makes tests reach queue-full and staging-exhausted paths.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpuio/engine.hpp"

namespace gpuio::test {

inline std::string test_dir() {
  const char* d = std::getenv("GPUIO_TEST_DIR");
  return d ? d : "/tmp";
}

// Byte j of block b of a file tagged `tag`: every block differs, so misplaced data is caught.
inline uint8_t pattern(uint64_t tag, uint64_t block, uint64_t j) {
  uint64_t x = (tag * 1000003u + block) * 2654435761u + j * 40503u;
  return static_cast<uint8_t>(x >> 13);
}

class TempFile {
 public:
  TempFile(const std::string& name, uint64_t bytes, uint64_t tag, uint32_t block = 4096) {
    path_ = test_dir() + "/gpuio_test_" + std::to_string(getpid()) + "_" + name;
    int fd = ::open(path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    std::vector<uint8_t> buf(block);
    for (uint64_t b = 0; b < bytes / block; ++b) {
      for (uint32_t j = 0; j < block; ++j) buf[j] = pattern(tag, b, j);
      if (::write(fd, buf.data(), block) != static_cast<ssize_t>(block)) std::abort();
    }
    ::close(fd);
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Small limits: a ring of 4, two staging slots of 8 KiB per worker, 16 KiB requests.
inline EngineOptions small_limits(std::vector<std::string> paths, const std::string& backend = "uring") {
  EngineOptions o;
  o.paths = std::move(paths);
  o.backend.kind = backend;
  o.queue_depth = 4;
  o.staging_slot_bytes = 8192;
  o.direct_min_bytes = 0;  // aligned buffers go zero-copy, so the ring alone limits them
  o.staging_bytes = 2 * 8192;
  o.io_bytes_max = 16384;
  o.workers = 1;
  o.io_timeout_ms = 20000;
  return o;
}

// A host buffer whose data starts `misalign` bytes after a 4 KiB boundary.
struct HostBuffer {
  explicit HostBuffer(size_t bytes, size_t misalign = 0) : raw(bytes + 8192), ptr(nullptr) {
    uintptr_t p = reinterpret_cast<uintptr_t>(raw.data());
    ptr = reinterpret_cast<uint8_t*>(((p + 4095) & ~uintptr_t(4095)) + misalign);
  }
  std::vector<uint8_t> raw;
  uint8_t* ptr;
};

}  // namespace gpuio::test
