#include "io/devices.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>

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



// Opens one device as opts say; on failure nothing stays open (IoError naming the path).
std::pair<int, DeviceInfo> open_device(const std::string& path, const DeviceOpenOptions& opts) {
  const bool direct = opts.direct, writable = opts.writable;
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
  try {
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
    return {fd, info};
  } catch (...) {
    ::close(fd);
    throw;
  }
}

// cachestat(2) (Linux 6.5; the same number on every architecture): how many pages of a range the page cache holds.
// Older kernels answer ENOSYS: read_now then always reads the device.
constexpr long kCachestat = 451;
struct CachestatRange {
  uint64_t off, len;
};
struct Cachestat {
  uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
std::atomic<bool> cachestat_missing{false};

bool cached_whole(int fd, uint64_t offset, uint32_t len) {
  if (fd < 0 || cachestat_missing.load(std::memory_order_relaxed)) return false;
  CachestatRange r{offset, len};
  Cachestat c{};
  if (syscall(kCachestat, fd, &r, &c, 0) != 0) {
    if (errno == ENOSYS) cachestat_missing.store(true, std::memory_order_relaxed);
    return false;
  }
  const uint64_t page = 4096, pages = (offset + len + page - 1) / page - offset / page;
  return c.nr_cache >= pages;
}

DeviceOpenOptions open_options(const BackendOptions& o) {
  DeviceOpenOptions d;
  d.direct = o.direct;
  d.writable = o.writable;
  d.lock = o.lock;
  d.lock_wait_ms = o.lock_wait_ms;
  return d;
}

}  // namespace

DeviceSet::DeviceSet(const std::vector<std::string>& paths, const BackendOptions& opts) {
  GPUIO_EXPECT(paths.size() <= limits::devices_max,
               "too many devices: " + std::to_string(paths.size()) + " > devices_max " +
                   std::to_string(limits::devices_max));
  open(paths, open_options(opts));
  initial_ = paths.size();
}

DeviceSet::Slot& DeviceSet::slot_mut(size_t i) {
  std::atomic<Slot*>& c = chunks_[i / chunk_slots];
  if (c.load(std::memory_order_relaxed) == nullptr) c.store(new Slot[chunk_slots], std::memory_order_release);
  return c.load(std::memory_order_relaxed)[i % chunk_slots];
}

std::vector<uint32_t> DeviceSet::open(const std::vector<std::string>& paths, const DeviceOpenOptions& opts) {
  std::vector<std::pair<int, DeviceInfo>> opened;
  try {
    for (const std::string& path : paths) opened.push_back(open_device(path, opts));
  } catch (...) {
    for (auto& o : opened) ::close(o.first);
    throw;
  }
  std::lock_guard<std::mutex> g(mu_);
  const size_t reusable = free_.size(), high = size_.load(std::memory_order_relaxed);
  if (high - reusable + opened.size() > limits::open_devices_max) {
    for (auto& o : opened) ::close(o.first);
    throw std::length_error("cannot open " + std::to_string(paths.size()) + " more devices: " +
                            std::to_string(high - reusable) + " are open, open_devices_max=" +
                            std::to_string(limits::open_devices_max));
  }
  std::vector<uint32_t> indices;
  size_t next = high;
  for (auto& o : opened) {
    uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
    } else {
      i = static_cast<uint32_t>(next++);
    }
    Slot& s = slot_mut(i);
    s.fd = o.first;
    s.cached_fd = o.second.direct ? ::open(o.second.path.c_str(), O_RDONLY | O_CLOEXEC) : -1;
    s.locked_by = opts.lock ? static_cast<int>(getpid()) : 0;
    s.info = std::move(o.second);
    indices.push_back(i);
  }
  size_.store(next, std::memory_order_release);  // publishes the slots written above
  return indices;
}

void DeviceSet::close(const std::vector<uint32_t>& indices) {
  std::lock_guard<std::mutex> g(mu_);
  for (uint32_t i : indices) {
    Slot& s = slot_mut(i);
    if (s.fd < 0) continue;
    end(s);
    s.info = DeviceInfo{};
    free_.push_back(i);
  }
}

int64_t DeviceSet::read_now(size_t i, void* buf, uint32_t len, uint64_t offset, bool* cached) const {
  const Slot& s = slot(i);
  *cached = s.info.direct && cached_whole(s.cached_fd, offset, len);
  const int fd = *cached ? s.cached_fd : s.fd;
  uint32_t done = 0;
  while (done < len) {
    ssize_t r = ::pread(fd, static_cast<uint8_t*>(buf) + done, len - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -errno;
    if (r == 0) break;  // the device's end
    done += static_cast<uint32_t>(r);
  }
  return done;
}

std::vector<int> DeviceSet::initial_fds() const {
  std::vector<int> fds;
  for (size_t i = 0; i < initial_; ++i) fds.push_back(fd(i));
  return fds;
}

void DeviceSet::sync(const std::vector<uint32_t>& indices) const {
  std::lock_guard<std::mutex> g(mu_);
  for (uint32_t i : indices) {
    const Slot& s = slot(i);
    if (s.fd >= 0 && fdatasync(s.fd) != 0)
      throw IoError(errno, "fdatasync of '" + s.info.path + "' failed: " + errno_name(errno));
  }
}

void DeviceSet::sync() const {
  std::vector<uint32_t> all;
  for (size_t i = 0; i < size(); ++i) all.push_back(static_cast<uint32_t>(i));
  sync(all);
}

// The lock goes with an explicit LOCK_UN before close: close() drops it only with the open file's last reference,
// and another may outlive ours: a forked child's inherited descriptor, or the kernel's for an io_uring request
// (liburing's tracker reports flocks that outlive the process which used io_uring). A child never unlocks its parent's
// lock (locked_by): the open file description, and with it the flock, is shared.
void DeviceSet::end(Slot& s) {
  if (s.fd >= 0 && s.locked_by == static_cast<int>(getpid())) (void)flock(s.fd, LOCK_UN);
  if (s.fd >= 0) ::close(s.fd);
  if (s.cached_fd >= 0) ::close(s.cached_fd);
  s.fd = s.cached_fd = -1;
  s.locked_by = 0;
}

DeviceSet::~DeviceSet() {
  for (auto& c : chunks_) {
    Slot* slots = c.load(std::memory_order_relaxed);
    if (slots == nullptr) continue;
    for (size_t i = 0; i < chunk_slots; ++i) end(slots[i]);
    delete[] slots;
  }
}

}  // namespace gpuio::detail
