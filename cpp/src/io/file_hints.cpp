#include "io/file_hints.hpp"

#include <fcntl.h>

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "gpuio/status.hpp"

namespace gpuio::io {
namespace {

constexpr long cachestat_nr = 451;  // the same number on every architecture (a syscall added after the unified table)

struct CachestatRange {
  uint64_t off, len;
};
struct Cachestat {
  uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

// -1: not probed yet, 0: the kernel lacks cachestat (ENOSYS), 1: it works. Probed once per process.
std::atomic<int> cachestat_state{-1};

bool cachestat_pages(int fd, uint64_t off, uint64_t len, uint64_t* pages) {
  if (cachestat_state.load(std::memory_order_relaxed) == 0) return false;
  CachestatRange r{off, len};
  Cachestat cs{};
  if (::syscall(cachestat_nr, fd, &r, &cs, 0) == 0) {
    cachestat_state.store(1, std::memory_order_relaxed);
    *pages = cs.nr_cache;
    return true;
  }
  if (errno == ENOSYS || errno == EPERM) {  // EPERM: a seccomp filter that predates the call
    cachestat_state.store(0, std::memory_order_relaxed);
    return false;
  }
  throw IoError(errno, "cachestat on fd " + std::to_string(fd) + ": " + std::strerror(errno));
}

uint64_t mincore_pages(int fd, uint64_t off, uint64_t len, uint64_t page) {
  const uint64_t first = off / page * page, last = (off + len + page - 1) / page * page;
  void* map = ::mmap(nullptr, last - first, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(first));
  if (map == MAP_FAILED) throw IoError(errno, std::string("mmap for mincore: ") + std::strerror(errno));
  std::vector<unsigned char> vec((last - first) / page);
  const int rc = ::mincore(map, last - first, vec.data());
  const int err = errno;
  ::munmap(map, last - first);
  if (rc != 0) throw IoError(err, std::string("mincore: ") + std::strerror(err));
  return static_cast<uint64_t>(std::count_if(vec.begin(), vec.end(), [](unsigned char v) { return v & 1; }));
}

}  // namespace

Residency page_cache_residency(int fd, const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  struct stat st{};
  if (::fstat(fd, &st) != 0) throw IoError(errno, std::string("fstat: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw IoError(EINVAL, "fd " + std::to_string(fd) + " is not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  Residency out;
  out.resident_bytes.reserve(ranges.size());
  bool used_mincore = false;
  for (const auto& [off, len_asked] : ranges) {
    const uint64_t len = off >= size ? 0 : std::min(len_asked, size - off);
    if (len == 0) {
      out.resident_bytes.push_back(0);
      continue;
    }
    uint64_t pages = 0;
    if (!cachestat_pages(fd, off, len, &pages)) {
      pages = mincore_pages(fd, off, len, page);
      used_mincore = true;
    }
    const uint64_t span = (off + len + page - 1) / page - off / page;
    // all pages cached: the whole range; otherwise the cached pages' bytes, never more than the range
    out.resident_bytes.push_back(pages >= span ? len : std::min(len, pages * page));
  }
  out.method = used_mincore ? "mincore" : "cachestat";
  return out;
}

bool reserve_space(int fd, uint64_t offset, uint64_t length) {
  if (length == 0) return true;
  if (::fallocate(fd, 0, static_cast<off_t>(offset), static_cast<off_t>(length)) == 0) return true;
  if (errno == EOPNOTSUPP || errno == ENOSYS) return false;
  throw IoError(errno, "fallocate of " + std::to_string(length) + " bytes: " + std::strerror(errno));
}

}  // namespace gpuio::io
