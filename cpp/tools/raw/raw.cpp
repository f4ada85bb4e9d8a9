#include "raw.hpp"

#include <fcntl.h>
#include <liburing.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gpuio/status.hpp"

namespace gpuio::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kHugePage = size_t{2} << 20;

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

uint64_t file_bytes(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(errno, "raw bench: cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  uint64_t bytes = 0;
  if (fstat(fd, &st) == 0) {
    bytes = static_cast<uint64_t>(st.st_size);
    unsigned long long dev_bytes = 0;
    if (S_ISBLK(st.st_mode) && ioctl(fd, BLKGETSIZE64, &dev_bytes) == 0) bytes = dev_bytes;
  }
  ::close(fd);
  return bytes;
}

// One thread's offset stream, as in iobench: xorshift64 (13, 7, 17) or a sequential walk that wraps.
// Blocks lie in [first, first + span): the ones past skip_bytes.
struct Offsets {
  uint64_t state, next, first, span;
  bool sequential;
  uint64_t block() {
    if (sequential) return first + next++ % span;
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return first + state % span;
  }
};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

class Thread {
 public:
  Thread(const RawOptions& o, uint32_t id, uint64_t first, uint64_t span)
      : o_(o), off_{0x9E3779B97F4A7C15ull * (id + 1), (span / o.threads) * id, first, span, o.sequential} {}

  // Opens the file and fills the buffers; then waits for the start gate so that setup (page faults of
  // the buffers, ring creation) is neither timed nor counted as CPU per op.
  void setup() {
    f_.fd = ::open(o_.path.c_str(), (o_.write ? O_RDWR : O_RDONLY) | (o_.direct ? O_DIRECT : 0) | O_CLOEXEC);
    if (f_.fd < 0) throw IoError(errno, "raw bench: cannot open '" + o_.path + "': " + std::strerror(errno));
    const uint32_t slots = o_.uring ? o_.queue_depth : 1;
    lanes_ = static_cast<uint32_t>(std::max<uint64_t>(1, o_.dest_bytes / (uint64_t(o_.block_bytes) * slots)));
    const size_t bytes = size_t(o_.block_bytes) * slots * lanes_;
    // Huge pages where the kernel gives them on request (THP "madvise"), as the engine's staging pool and
    // NumPy's large arrays get them: an O_DIRECT request pins its buffer's pages, and 4 KiB pages made a 1 MiB
    // read cost the reference ~3x the CPU of gpuio's (so gpuio "beat the device" 2x on a 2-core VM).
    void* p = nullptr;
    if (posix_memalign(&p, bytes >= kHugePage ? kHugePage : 4096, bytes) != 0) throw std::bad_alloc();
    buf_.reset(p);
    madvise(p, bytes, MADV_HUGEPAGE);
    std::memset(p, 0xab, bytes);
    if (o_.uring) {
      int rc = io_uring_queue_init(o_.queue_depth, &ring_, 0);
      if (rc < 0) throw IoError(-rc, std::string("raw bench: io_uring_queue_init: ") + std::strerror(-rc));
      ring_ok_ = true;
    }
  }
  ~Thread() {
    if (ring_ok_) io_uring_queue_exit(&ring_);
  }

  uint64_t run(Clock::time_point end) {
    char* buf = static_cast<char*>(buf_.get());
    return o_.uring ? run_uring(buf, end) : run_psync(f_.fd, buf, end);
  }

 private:
  // Time-bound runs issue at least one request, so a thread that starts after its deadline (a stalled box) still
  // measures something instead of reporting zero requests.
  bool more(uint64_t issued, Clock::time_point end) const {
    return o_.ops_max ? issued < o_.ops_max : issued == 0 || Clock::now() < end;
  }

  [[noreturn]] void fail(int err, uint64_t block, const char* what) const {
    throw IoError(err, std::string("raw bench: ") + what + " of '" + o_.path + "' at offset " +
                           std::to_string(block * o_.block_bytes) + ": " + std::strerror(err));
  }

  uint64_t run_psync(int fd, char* buf, Clock::time_point end) {
    const size_t bs = o_.block_bytes;
    uint64_t ops = 0;
    // Check the clock every 64 requests, as iobench does, so the clock is not part of the per-op cost.
    while (more(ops, end)) {
      for (int k = 0; k < 64 && (!o_.ops_max || ops < o_.ops_max); ++k) {
        uint64_t b = off_.block();
        char* p = buf + (ops % lanes_) * bs;
        ssize_t r = o_.write ? pwrite(fd, p, bs, off_t(b * bs)) : pread(fd, p, bs, off_t(b * bs));
        if (r != static_cast<ssize_t>(bs)) fail(r < 0 ? errno : EIO, b, o_.write ? "pwrite" : "pread");
        ++ops;
      }
    }
    return ops;
  }

  uint64_t run_uring(char* buf, Clock::time_point end) {
    io_uring& ring = ring_;
    const int fd = f_.fd;
    int rc = 0;
    const uint32_t bs = o_.block_bytes;
    uint32_t inflight = 0;
    uint64_t issued = 0, ops = 0;
    std::vector<uint64_t> slot_block(o_.queue_depth), slot_uses(o_.queue_depth);
    std::vector<uint32_t> free_slots;
    for (uint32_t i = o_.queue_depth; i-- > 0;) free_slots.push_back(i);
    for (;;) {
      bool go = more(issued, end);
      while (go && inflight < o_.queue_depth && (!o_.ops_max || issued < o_.ops_max)) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        if (!sqe) break;
        uint32_t slot = free_slots.back();
        free_slots.pop_back();
        uint64_t b = off_.block();
        slot_block[slot] = b;
        char* p = buf + (size_t(slot) + size_t(o_.queue_depth) * (slot_uses[slot]++ % lanes_)) * bs;
        if (o_.write)
          io_uring_prep_write(sqe, fd, p, bs, b * bs);
        else
          io_uring_prep_read(sqe, fd, p, bs, b * bs);
        io_uring_sqe_set_data64(sqe, slot);
        ++inflight;
        ++issued;
      }
      io_uring_submit(&ring);
      if (inflight == 0) break;
      io_uring_cqe* cqe = nullptr;
      rc = io_uring_wait_cqe(&ring, &cqe);
      if (rc == -EINTR) continue;
      if (rc < 0) throw IoError(-rc, std::string("raw bench: io_uring_wait_cqe: ") + std::strerror(-rc));
      unsigned head, seen = 0;
      io_uring_for_each_cqe(&ring, head, cqe) {
        uint32_t slot = static_cast<uint32_t>(io_uring_cqe_get_data64(cqe));
        if (cqe->res != static_cast<int>(bs)) {
          fail(cqe->res < 0 ? -cqe->res : EIO, slot_block[slot], o_.write ? "uring write" : "uring read");
        }
        free_slots.push_back(slot);
        ++seen;
      }
      io_uring_cq_advance(&ring, seen);
      inflight -= seen;
      ops += seen;
    }
    return ops;
  }

  const RawOptions& o_;
  Offsets off_;
  Fd f_;
  std::unique_ptr<void, FreeDeleter> buf_;
  io_uring ring_{};
  bool ring_ok_ = false;
  uint32_t lanes_ = 1;  // buffers per request slot (dest_bytes)
};

// Releases the threads together once all are set up (or one failed), and tells the caller when.
struct StartGate {
  std::mutex mu;
  std::condition_variable cv;
  uint32_t ready = 0;
  bool open = false;
  Clock::time_point end;
};

}  // namespace

RawResult run_raw(const RawOptions& o) {
  GPUIO_EXPECT(o.block_bytes >= 512 && o.block_bytes % 512 == 0,
               "raw bench: block_bytes=" + std::to_string(o.block_bytes) + " must be a multiple of 512");
  GPUIO_EXPECT(o.threads >= 1 && o.threads <= 256, "raw bench: threads=" + std::to_string(o.threads) + " not in [1, 256]");
  GPUIO_EXPECT(!o.uring || (o.queue_depth >= 1 && o.queue_depth <= 4096),
               "raw bench: queue_depth=" + std::to_string(o.queue_depth) + " not in [1, 4096]");
  GPUIO_EXPECT(o.ops_max > 0 || o.seconds > 0, "raw bench: give seconds > 0 or ops_max > 0");
  const uint64_t blocks = file_bytes(o.path) / o.block_bytes;
  const uint64_t first = (o.skip_bytes + o.block_bytes - 1) / o.block_bytes;
  const uint64_t span = blocks > first ? blocks - first : 0;
  GPUIO_EXPECT(span >= o.threads, "raw bench: '" + o.path + "' holds " + std::to_string(span) + " blocks of " +
                                      std::to_string(o.block_bytes) + " bytes" +
                                      (first ? " past skip_bytes=" + std::to_string(o.skip_bytes) : std::string()) +
                                      ", fewer than threads");

  std::vector<uint64_t> ops(o.threads, 0);
  std::exception_ptr error;
  std::mutex error_mu;
  StartGate gate;
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < o.threads; ++i) {
    threads.emplace_back([&, i] {
      Clock::time_point end;
      std::unique_ptr<Thread> t;
      try {
        t = std::make_unique<Thread>(o, i, first, span);
        t->setup();
      } catch (...) {
        std::lock_guard<std::mutex> g(error_mu);
        if (!error) error = std::current_exception();
        t.reset();
      }
      {
        std::unique_lock<std::mutex> g(gate.mu);
        ++gate.ready;
        gate.cv.notify_all();
        gate.cv.wait(g, [&] { return gate.open; });
        end = gate.end;
      }
      if (!t) return;
      try {
        ops[i] = t->run(end);
      } catch (...) {
        std::lock_guard<std::mutex> g(error_mu);
        if (!error) error = std::current_exception();
      }
    });
  }
  double cpu0;
  Clock::time_point t0;
  {
    std::unique_lock<std::mutex> g(gate.mu);
    gate.cv.wait(g, [&] { return gate.ready == o.threads; });
    cpu0 = process_cpu_seconds();
    t0 = Clock::now();
    gate.end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
    gate.open = true;
  }
  gate.cv.notify_all();
  for (auto& t : threads) t.join();
  RawResult r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.cpu_seconds = process_cpu_seconds() - cpu0;
  if (error) std::rethrow_exception(error);
  for (uint64_t n : ops) r.ops += n;
  r.bytes = r.ops * o.block_bytes;
  return r;
}

}  // namespace gpuio::bench
