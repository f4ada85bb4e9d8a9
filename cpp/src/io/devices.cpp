#include "io/devices.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <cstdlib>
#include <cstring>

#include "gpuio/status.hpp"

namespace gpuio::detail {
namespace {

[[noreturn]] void fail(int err, const std::string& path, const std::string& what) {
  throw IoError(err, "cannot open device '" + path + "': " + what + ": " + errno_name(err));
}

// O_DIRECT support is only certain after a real aligned read: some file systems accept the flag at
// open() and reject the I/O later with EINVAL.
bool direct_read_works(int fd, uint32_t align) {
  void* buf = nullptr;
  if (posix_memalign(&buf, 4096, 4096) != 0) return false;
  ssize_t r = pread(fd, buf, align, 0);
  int err = errno;
  std::free(buf);
  return r >= 0 || err != EINVAL;
}

// Exclusive flock, retried until wait_ms: bounded, so a live holder yields an error, never a hang.
void lock_device(int fd, const std::string& path, uint32_t wait_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) fail(errno, path, "flock failed");
    if (std::chrono::steady_clock::now() >= deadline) {
      fail(EWOULDBLOCK, path, "locked by another engine for over " + std::to_string(wait_ms) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

DeviceSet::DeviceSet(const std::vector<std::string>& paths, const BackendOptions& opts) {
  const bool direct = opts.direct, writable = opts.writable;
  GPUIO_EXPECT(!paths.empty(), "at least one device path is needed, got an empty list");
  GPUIO_EXPECT(paths.size() <= limits::devices_max,
               "too many devices: " + std::to_string(paths.size()) + " > devices_max " +
                   std::to_string(limits::devices_max));
  try {
    for (const std::string& path : paths) {
      int flags = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC;
      int fd = ::open(path.c_str(), flags | (direct ? O_DIRECT : 0));
      if (fd < 0 && direct && errno == EINVAL) {
        int probe = ::open(path.c_str(), flags);
        if (probe >= 0) {
          ::close(probe);
          fail(EINVAL, path, "the file system does not support O_DIRECT; pass direct=False");
        }
      }
      if (fd < 0 && writable && (errno == EACCES || errno == EROFS || errno == EPERM)) {
        fail(errno, path, "not writable (open a read-only engine or fix permissions)");
      }
      if (fd < 0) fail(errno, path, "open failed");
      fds_.push_back(fd);
      if (opts.lock) lock_device(fd, path, opts.lock_wait_ms);
      struct stat st {};
      if (fstat(fd, &st) != 0) fail(errno, path, "fstat failed");
      DeviceInfo info;
      info.path = path;
      info.direct = direct;
      if (S_ISBLK(st.st_mode)) {
        info.block_device = true;
        unsigned long long bytes = 0;
        int lbs = 512;
        if (ioctl(fd, BLKGETSIZE64, &bytes) != 0) fail(errno, path, "BLKGETSIZE64 failed");
        if (ioctl(fd, BLKSSZGET, &lbs) != 0) fail(errno, path, "BLKSSZGET failed");
        info.bytes = bytes;
        info.logical_block_bytes = static_cast<uint32_t>(lbs);
      } else if (S_ISREG(st.st_mode)) {
        info.bytes = static_cast<uint64_t>(st.st_size);
        info.logical_block_bytes = 512;
      } else {
        fail(EINVAL, path, "not a regular file or block device");
      }
      if (direct && info.bytes >= 4096 && !direct_read_works(fd, info.logical_block_bytes)) {
        fail(EINVAL, path, "the file system rejects O_DIRECT reads; pass direct=False");
      }
      infos_.push_back(info);
    }
  } catch (...) {
    for (int fd : fds_) ::close(fd);
    throw;
  }
}

void DeviceSet::sync() const {
  for (size_t i = 0; i < fds_.size(); ++i) {
    if (fdatasync(fds_[i]) != 0) throw IoError(errno, "fdatasync of '" + infos_[i].path + "' failed: " + errno_name(errno));
  }
}

DeviceSet::~DeviceSet() {
  for (int fd : fds_) ::close(fd);
}

}  // namespace gpuio::detail
