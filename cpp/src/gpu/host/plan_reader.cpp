// The plan reader (gpuio/plan_reader.hpp): one thread drives one io_uring queue of O_DIRECT piece reads, the
// page-cache copies (preadv2 RWF_NOWAIT) in the gaps, and the copy stage; nothing is allocated or registered per
// piece (the ring is one block of the process's pinned pool, registered once as the queue's fixed buffer).
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu/host/pipeline.hpp"
#include "gpuio/io.hpp"
#include "gpuio/plan_reader.hpp"
#include "gpuio/status.hpp"

namespace gpuio {
namespace detail {
namespace {

constexpr uint64_t kBlock = 4096;
uint64_t down(uint64_t x) { return x / kBlock * kBlock; }
uint64_t up(uint64_t x) { return (x + kBlock - 1) / kBlock * kBlock; }

class HostStage final : public CopyStage {
 public:
  void copy(uint32_t, void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void piece_done(uint32_t) override {}
  bool piece_free(uint32_t, bool) override { return true; }
  const char* drain() override { return ""; }
};

struct Range {
  uint64_t lo, hi;
};
enum class Kind { pagecache, direct, buffered };
enum class PieceState : uint8_t { free, reading, copying };

class Reader {
 public:
  Reader(const std::string& path, uint64_t size, const PlanSegment* seg, size_t n, const PlanOptions& o)
      : path_(path), size_(size), seg_(seg), n_(n), o_(o) {}

  ~Reader() {
    if (fd_ >= 0) close(fd_);
  }

  PlanStats run() {
    auto t0 = std::chrono::steady_clock::now();
    check();
    fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw IoError(errno, path_ + ": open: " + errno_name(errno));
    plan();
    if (device()) ensure_ring();
    if (!direct_todo_.empty() && !ensure_queue()) {
      for (Range r : direct_todo_) plain_todo_.push_back(r);
      direct_todo_.clear();
    }
    try {
      loop();
    } catch (...) {
      drain_reads();
      if (stage_) stage_->drain();
      throw;
    }
    const char* copy_error = stage_ ? stage_->drain() : "";
    if (*copy_error) throw std::runtime_error(path_ + ": copy to the destination failed: " + copy_error);
    if (err_) throw IoError(err_, err_text_);
    st_.direct = static_cast<bool>(q_);
    st_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return st_;
  }

 private:
  bool device() const { return o_.device >= 0; }
  std::string errno_name(int e) const { return detail::errno_name(e); }

  void check() {
    GPUIO_EXPECT(o_.piece_bytes >= kBlock && o_.piece_bytes % kBlock == 0,
                 "piece_bytes=" + std::to_string(o_.piece_bytes) + " must be a positive multiple of 4096");
    GPUIO_EXPECT(o_.pieces >= 1 && o_.pieces <= 1024, "pieces=" + std::to_string(o_.pieces) + " must be 1..1024");
    GPUIO_EXPECT(o_.streams >= 1 && o_.streams <= 64, "streams=" + std::to_string(o_.streams) + " must be 1..64");
    uint64_t end = 0;
    for (size_t i = 0; i < n_; ++i) {
      const PlanSegment& s = seg_[i];
      GPUIO_EXPECT(s.file_offset >= end, "segment " + std::to_string(i) + " (file offset " +
                                             std::to_string(s.file_offset) + ") overlaps or precedes the one before");
      GPUIO_EXPECT(s.file_offset + s.len <= size_, "segment " + std::to_string(i) + " ends at byte " +
                                                      std::to_string(s.file_offset + s.len) + ", past the file's " +
                                                      std::to_string(size_));
      GPUIO_EXPECT(s.len == 0 || s.dst != 0, "segment " + std::to_string(i) + " has no destination");
      end = s.file_offset + s.len;
      st_.bytes += s.len;
    }
#ifndef GPUIO_HAVE_CUDA
    GPUIO_EXPECT(!device(), "device=" + std::to_string(o_.device) + ": gpuio was built without the CUDA layer");
#endif
  }

  // Ranges to read: resident segments as page-cache jobs (adjacent ones merged), the rest merged through gaps
  // of less than a block (one O_DIRECT read covers both) for O_DIRECT.
  void plan() {
    for (size_t i = 0; i < n_; ++i) {
      const PlanSegment& s = seg_[i];
      if (s.len == 0) continue;
      auto& list = s.resident ? cached_todo_ : direct_todo_;
      uint64_t gap = s.resident ? 0 : kBlock;
      if (!list.empty() && s.file_offset <= list.back().hi + gap && (s.resident ? 1 : 0) == last_resident_)
        list.back().hi = s.file_offset + s.len;
      else
        list.push_back({s.file_offset, s.file_offset + s.len});
      last_resident_ = s.resident ? 1 : 0;
    }
    if (!o_.direct) {  // everything by plain pread
      for (Range r : direct_todo_) plain_todo_.push_back(r);
      direct_todo_.clear();
    }
  }

  void ensure_ring() {
    if (ring_) return;
    ring_ = PinnedBlock::take(uint64_t{o_.piece_bytes} * o_.pieces, device(), PinnedReuse::pooled, "plan_reader");
#ifdef GPUIO_HAVE_CUDA
    stage_ = device() ? make_cuda_copy_stage(o_.device, o_.streams, o_.pieces) : make_host_copy_stage();
#else
    stage_ = make_host_copy_stage();
#endif
    state_.assign(o_.pieces, PieceState::free);
    flight_.assign(o_.pieces, {});
    for (uint32_t k = o_.pieces; k-- > 0;) free_.push_back(k);
  }

  // The O_DIRECT queue (started on first need); false where O_DIRECT is off or the file system refuses it.
  bool ensure_queue() {
    if (q_ || !o_.direct || direct_refused_) return static_cast<bool>(q_);
    ensure_ring();
    BackendOptions bo;
    bo.kind = "uring";
    bo.direct = true;
    bo.writable = false;
    try {
      backend_ = make_backend({path_}, bo);
      q_ = backend_->create_queue(o_.pieces, {FixedBuffer{ring_->data(), ring_->bytes()}});
    } catch (const IoError& e) {
      if (e.error_code() != EINVAL) throw;
      backend_.reset();  // the file system refuses O_DIRECT (tmpfs): plain preads instead
      direct_refused_ = true;
    }
    return static_cast<bool>(q_);
  }

  uint8_t* piece(uint32_t k) const { return ring_->data() + uint64_t{k} * o_.piece_bytes; }

  // Copies file bytes [lo, hi) held at src (src[0] is file byte src_lo) to each segment they overlap.
  uint64_t deliver(uint32_t k, const uint8_t* src, uint64_t src_lo, uint64_t lo, uint64_t hi, Kind kind) {
    size_t i = std::upper_bound(seg_, seg_ + n_, lo, [](uint64_t v, const PlanSegment& s) { return v < s.file_offset; }) -
               seg_;
    i = i ? i - 1 : 0;
    uint64_t got = 0;
    for (; i < n_ && seg_[i].file_offset < hi; ++i) {
      const PlanSegment& s = seg_[i];
      uint64_t a = std::max(lo, s.file_offset), b = std::min(hi, s.file_offset + s.len);
      if (b <= a) continue;
      stage_->copy(k, reinterpret_cast<uint8_t*>(s.dst) + (a - s.file_offset), src + (a - src_lo), b - a);
      ++st_.copies;
      got += b - a;
    }
    count(kind, got);
    return got;
  }

  void count(Kind kind, uint64_t n) {
    (kind == Kind::pagecache ? st_.pagecache_bytes : kind == Kind::direct ? st_.direct_bytes : st_.buffered_bytes) += n;
  }

  void fail(int e, uint64_t off, const std::string& what) {
    if (err_) return;
    err_ = e;
    err_text_ = path_ + ": " + what + " at byte " + std::to_string(off) + ": " + errno_name(e);
  }

  // pread of [lo, hi) into dst, all of it (nowait: RWF_NOWAIT, stopping at the first page not in the page
  // cache). Returns the bytes read; sets the error for a failure or a file that ended early.
  uint64_t pread_into(uint8_t* dst, uint64_t lo, uint64_t hi, bool nowait) {
    uint64_t got = 0;
    while (lo + got < hi) {
      struct iovec iov = {dst + got, static_cast<size_t>(hi - lo - got)};
      ssize_t r = preadv2(fd_, &iov, 1, static_cast<off_t>(lo + got), nowait ? RWF_NOWAIT : 0);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && nowait && (errno == EAGAIN || errno == EOPNOTSUPP || errno == EINVAL)) return got;
      if (r < 0) {
        fail(errno, lo + got, "pread");
        return got;
      }
      if (r == 0) {
        if (nowait) return got;  // a readahead mark stops RWF_NOWAIT too: the caller reads the rest
        fail(EIO, lo + got, "the file ended (truncated meanwhile?) reading");
        return got;
      }
      got += static_cast<uint64_t>(r);
    }
    return got;
  }

  // One step of page-cache (or plain pread) work; false when it needs a free piece and none is.
  bool step_buffered(std::deque<Range>& todo, bool nowait) {
    Range& r = todo.front();
    Kind kind = nowait ? Kind::pagecache : Kind::buffered;
    if (!device()) {  // straight into the destinations, segment by segment
      size_t i = std::upper_bound(seg_, seg_ + n_, r.lo, [](uint64_t v, const PlanSegment& s) { return v < s.file_offset; }) -
                 seg_;
      i = i ? i - 1 : 0;
      for (; i < n_ && seg_[i].file_offset < r.hi; ++i) {
        const PlanSegment& s = seg_[i];
        uint64_t a = std::max(r.lo, s.file_offset), b = std::min(r.hi, s.file_offset + s.len);
        if (b <= a) continue;
        uint64_t got = pread_into(reinterpret_cast<uint8_t*>(s.dst) + (a - s.file_offset), a, b, nowait);
        count(kind, got);
        if (got < b - a) {
          if (!err_) to_direct({a + got, r.hi});
          todo.pop_front();
          return true;
        }
      }
      todo.pop_front();
      return true;
    }
    if (free_.empty()) return false;
    uint32_t k = free_.back();
    free_.pop_back();
    uint64_t hi = std::min(r.hi, r.lo + o_.piece_bytes);
    uint64_t got = pread_into(piece(k), r.lo, hi, nowait);
    if (got) deliver(k, piece(k), r.lo, r.lo, r.lo + got, kind);
    to_copying(k);
    if (got < hi - r.lo && !err_) {
      to_direct({r.lo + got, r.hi});
      todo.pop_front();
    } else if ((r.lo = hi) >= r.hi || err_) {
      todo.pop_front();
    }
    return true;
  }

  void to_direct(Range r) {
    if (ensure_queue())
      direct_todo_.push_back(r);
    else
      plain_todo_.push_back(r);
  }

  void to_copying(uint32_t k) {
    stage_->piece_done(k);
    state_[k] = PieceState::copying;
    copying_.push_back(k);
  }

  void reclaim(bool wait) {
    while (!copying_.empty() && stage_->piece_free(copying_.front(), wait)) {
      state_[copying_.front()] = PieceState::free;
      free_.push_back(copying_.front());
      copying_.pop_front();
      wait = false;
    }
  }

  // Prepares one O_DIRECT piece read for the front range (or preads its part in the file's partial last block).
  void issue_direct() {
    Range& r = direct_todo_.front();
    uint32_t k = free_.back();
    uint64_t whole = down(size_);
    if (r.lo >= whole) {  // the partial last block: O_DIRECT cannot read it
      free_.pop_back();
      uint64_t got = pread_into(piece(k), r.lo, r.hi, false);
      if (got) deliver(k, piece(k), r.lo, r.lo, r.lo + got, Kind::buffered);
      to_copying(k);
      direct_todo_.pop_front();
      return;
    }
    uint64_t a = down(r.lo), b = std::min({a + o_.piece_bytes, up(r.hi), whole});
    IoRequest req;
    req.user_data = k;
    req.buf = piece(k);
    req.offset = a;
    req.len = static_cast<uint32_t>(b - a);
    req.buf_index = 0;
    if (!q_->prepare(req)) return;  // queue full: after the next reap
    free_.pop_back();
    state_[k] = PieceState::reading;
    flight_[k] = {a, b, r.lo, std::min(r.hi, b)};
    ++inflight_;
    st_.inflight_max = std::max(st_.inflight_max, inflight_);
    st_.disk_read_bytes += b - a;
    if ((r.lo = b) >= r.hi) direct_todo_.pop_front();
  }

  void reap(int wait_min) {
    IoCompletion cq[64];
    int got = q_->submit_and_reap(cq, 64, wait_min);
    if (got < 0) {
      if (got == -EINTR || got == -EAGAIN || got == -EBUSY) return;
      throw IoError(-got, path_ + ": io_uring: " + errno_name(-got));
    }
    for (int i = 0; i < got; ++i) {
      uint32_t k = static_cast<uint32_t>(cq[i].user_data);
      const Flight& f = flight_[k];
      --inflight_;
      ++st_.pieces;
      if (cq[i].res < 0) {
        fail(-cq[i].res, f.lo, "O_DIRECT read");
      } else if (static_cast<uint64_t>(cq[i].res) < f.hi - f.lo) {
        fail(EIO, f.lo + cq[i].res, "short O_DIRECT read (the file shrank?)");
      } else if (!err_) {
        deliver(k, piece(k), f.lo, f.own_lo, f.own_hi, Kind::direct);
      }
      to_copying(k);
    }
  }

  void drain_reads() {
    while (q_ && inflight_ > 0) {
      IoCompletion cq[64];
      int got = q_->submit_and_reap(cq, 64, 1);
      if (got < 0 && got != -EINTR && got != -EAGAIN && got != -EBUSY) return;  // the ring is gone
      inflight_ -= static_cast<uint32_t>(std::max(got, 0));
    }
  }

  void loop() {
    while (true) {
      if (stage_) reclaim(false);
      bool did = false;
      while (!err_ && q_ && !free_.empty() && !direct_todo_.empty() && inflight_ < o_.pieces) {
        size_t before = free_.size();
        issue_direct();
        if (free_.size() == before) break;  // queue full
        did = true;
      }
      if (!err_ && !cached_todo_.empty())
        did |= step_buffered(cached_todo_, true);
      else if (!err_ && !plain_todo_.empty())
        did |= step_buffered(plain_todo_, false);
      bool left = !err_ && !(direct_todo_.empty() && cached_todo_.empty() && plain_todo_.empty());
      if (q_ && (inflight_ > 0 || q_->inflight() > 0)) {
        reap(did || (!free_.empty() && left) ? 0 : 1);
      } else if (!left) {
        return;
      } else if (!did) {
        reclaim(true);  // every piece is being copied out: wait for the oldest
      }
    }
  }

  struct Flight {
    uint64_t lo = 0, hi = 0, own_lo = 0, own_hi = 0;
  };
  const std::string& path_;
  uint64_t size_;
  const PlanSegment* seg_;
  size_t n_;
  PlanOptions o_;
  int fd_ = -1;
  int last_resident_ = -1;
  bool direct_refused_ = false;
  PlanStats st_;
  std::deque<Range> direct_todo_, cached_todo_, plain_todo_;
  std::unique_ptr<PinnedBlock> ring_;
  std::unique_ptr<CopyStage> stage_;
  std::unique_ptr<IoBackend> backend_;
  std::unique_ptr<IoQueue> q_;
  std::vector<PieceState> state_;
  std::vector<Flight> flight_;
  std::vector<uint32_t> free_;
  std::deque<uint32_t> copying_;
  uint32_t inflight_ = 0;
  int err_ = 0;
  std::string err_text_;
};

}  // namespace

std::unique_ptr<CopyStage> make_host_copy_stage() { return std::make_unique<HostStage>(); }

}  // namespace detail

PlanStats read_plan(const std::string& path, uint64_t file_size, const PlanSegment* segments, size_t n,
                    const PlanOptions& opts) {
  detail::Reader r(path, file_size, segments, n, opts);
  return r.run();
}

PlanStats read_plans(const std::vector<PlanJob>& jobs, uint32_t threads, uint32_t* calls_max) {
  GPUIO_EXPECT(threads >= 1 && threads <= 1024, "threads=" + std::to_string(threads) + " must be 1..1024");
  auto t0 = std::chrono::steady_clock::now();
  std::mutex mu;
  size_t next = 0;
  uint32_t active = 0, active_max = 0;
  std::exception_ptr error;
  PlanStats total;
  auto work = [&] {
    while (true) {
      size_t i;
      {
        std::lock_guard<std::mutex> g(mu);
        if (error || next == jobs.size()) return;
        i = next++;
        active_max = std::max(active_max, ++active);
      }
      const PlanJob& j = jobs[i];
      PlanStats st;
      std::exception_ptr e;
      try {
        st = read_plan(j.path, j.file_size, j.segments.data(), j.segments.size(), j.opts);
      } catch (...) {
        e = std::current_exception();
      }
      std::lock_guard<std::mutex> g(mu);
      --active;
      if (e) {
        if (!error) error = e;
        return;
      }
      total.bytes += st.bytes;
      total.pagecache_bytes += st.pagecache_bytes;
      total.direct_bytes += st.direct_bytes;
      total.buffered_bytes += st.buffered_bytes;
      total.disk_read_bytes += st.disk_read_bytes;
      total.pieces += st.pieces;
      total.copies += st.copies;
      total.inflight_max = std::max(total.inflight_max, st.inflight_max);
      total.direct = total.direct || st.direct;
    }
  };
  size_t n = std::min<size_t>(threads, jobs.size());
  std::vector<std::thread> pool;
  pool.reserve(n ? n - 1 : 0);
  try {
    for (size_t k = 1; k < n; ++k) pool.emplace_back(work);
  } catch (...) {  // no thread to be had: stop the taking, let the started ones end, then throw it
    std::lock_guard<std::mutex> g(mu);
    if (!error) error = std::current_exception();
  }
  if (n) work();  // the calling thread is one of them
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  if (calls_max) *calls_max = active_max;
  total.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return total;
}

}  // namespace gpuio
