#include "io/sim_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "gpuio/status.hpp"

namespace gpuio::detail {

SimStore::SimStore(uint64_t bytes, const std::string& path) : bytes_(bytes) {
  if (!path.empty()) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw IoError(errno, "sim backend: cannot open backing file '" + path + "': " + errno_name(errno));
    if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
      int e = errno;
      ::close(fd_);
      throw IoError(e, "sim backend: cannot size backing file '" + path + "': " + errno_name(e));
    }
    return;
  }
  nchunks_ = (bytes + kChunk - 1) / kChunk;
  chunks_.reset(new std::atomic<char*>[nchunks_]);
  for (uint64_t i = 0; i < nchunks_; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

SimStore::~SimStore() {
  if (fd_ >= 0) ::close(fd_);
  for (uint64_t i = 0; i < nchunks_; ++i) delete[] chunks_[i].load(std::memory_order_relaxed);
}

void SimStore::sync() {
  if (fd_ >= 0 && ::fsync(fd_) != 0) throw IoError(errno, "sim backend: fsync of backing file failed: " + errno_name(errno));
}

char* SimStore::chunk(uint64_t i, bool create) const {
  char* c = chunks_[i].load(std::memory_order_acquire);
  if (c || !create) return c;
  char* fresh = new char[kChunk]();
  if (chunks_[i].compare_exchange_strong(c, fresh, std::memory_order_acq_rel)) return fresh;
  delete[] fresh;  // another thread won the race; c holds its chunk
  return c;
}

int32_t SimStore::read(void* dst, uint64_t offset, uint32_t len) const {
  if (fd_ >= 0) {
    ssize_t n = ::pread(fd_, dst, len, static_cast<off_t>(offset));
    return n < 0 ? -errno : static_cast<int32_t>(n);
  }
  char* out = static_cast<char*>(dst);
  for (uint32_t done = 0; done < len;) {
    uint64_t at = offset + done, in = at % kChunk;
    uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(len - done, kChunk - in));
    const char* c = chunk(at / kChunk, false);
    if (c)
      std::memcpy(out + done, c + in, n);
    else
      std::memset(out + done, 0, n);
    done += n;
  }
  return static_cast<int32_t>(len);
}

int32_t SimStore::write(const void* src, uint64_t offset, uint32_t len) {
  if (fd_ >= 0) {
    ssize_t n = ::pwrite(fd_, src, len, static_cast<off_t>(offset));
    return n < 0 ? -errno : static_cast<int32_t>(n);
  }
  const char* in_buf = static_cast<const char*>(src);
  for (uint32_t done = 0; done < len;) {
    uint64_t at = offset + done, in = at % kChunk;
    uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(len - done, kChunk - in));
    std::memcpy(chunk(at / kChunk, true) + in, in_buf + done, n);
    done += n;
  }
  return static_cast<int32_t>(len);
}

}  // namespace gpuio::detail
