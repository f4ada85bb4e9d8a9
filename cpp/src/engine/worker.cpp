#include "engine/worker.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/engine_impl.hpp"
#include "engine/futex.hpp"
#include "gpuio/status.hpp"

namespace gpuio::detail {

Worker::Worker(EngineImpl& engine, uint32_t id) : engine_(engine), id_(id) {}

Worker::~Worker() { stop(); }

void Worker::start() {
  std::promise<void> started;
  std::future<void> ready = started.get_future();
  thread_ = std::thread([this, &started] { run(started); });
  try {
    ready.get();
  } catch (...) {
    thread_.join();
    throw;
  }
}

void Worker::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  signal_.fetch_add(1, std::memory_order_release);
  futex_wake_all(&signal_);
  thread_.join();
}

double Worker::cpu_seconds() const {
  timespec ts{};
  if (!cpu_clock_ok_.load(std::memory_order_acquire) || !thread_.joinable() || clock_gettime(cpu_clock_, &ts) != 0) {
    return final_cpu_seconds_;
  }
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

namespace {
int64_t steady_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
}  // namespace

double Worker::busy_seconds() const {
  // A worker that never sleeps would otherwise report no busy time at all until it stops.
  int64_t since = counters_.busy_since_ns.load(std::memory_order_acquire);
  uint64_t done = counters_.busy_ns.load(std::memory_order_acquire);
  int64_t open = since < 0 ? 0 : std::max<int64_t>(0, steady_ns(Clock::now()) - since);
  return (done + static_cast<uint64_t>(open)) * 1e-9;
}

void Worker::post(std::vector<Extent>& extents) {
  {
    std::lock_guard<std::mutex> g(inbox_mu_);
    if (inbox_.empty()) {
      inbox_.swap(extents);
    } else {
      inbox_.insert(inbox_.end(), extents.begin(), extents.end());
    }
    has_inbox_.store(true, std::memory_order_release);
  }
  extents.clear();
  signal_.fetch_add(1, std::memory_order_release);
  if (sleeping_.load(std::memory_order_acquire)) futex_wake_all(&signal_);
}

void Worker::take_inbox() {
  if (!has_inbox_.load(std::memory_order_acquire)) return;
  std::vector<Extent> got;
  {
    std::lock_guard<std::mutex> g(inbox_mu_);
    got.swap(inbox_);
    has_inbox_.store(false, std::memory_order_release);
  }
  for (Extent& e : got) pending_.push_back(e);
}

bool Worker::issue(uint32_t slot) {
  Inflight& f = slots_[slot];
  IoRequest r;
  r.user_data = slot;
  r.device = f.e.device;
  r.op = f.e.op;
  r.offset = f.e.offset + f.done;
  r.len = f.e.len - f.done;
  if (f.e.chunk) {
    r.buf = f.e.chunk->host + (f.e.mem - f.e.chunk->dst) + f.done;
    // Not a registered buffer: registering the area with every ring faulted in (and pinned) it for every engine,
    // also those that never read into GPU memory (+32 MiB resident, test_streams_memory). It is touched only
    // when used, and pinned by the CUDA layer when a GPU path attaches.
    r.buf_index = -1;
  } else if (f.e.staged) {
    r.buf = engine_.staging->slot(id_, static_cast<uint32_t>(f.staging)) + f.done;
    r.buf_index = 0;  // this worker's whole slice is registered as fixed buffer 0
  } else {
    r.buf = f.e.mem + f.done;
  }
  if (queue_->prepare(r)) return true;
  counters_.queue_full.fetch_add(1, std::memory_order_relaxed);
  return false;
}

bool Worker::prepare_pending() {
  while (!retry_.empty()) {
    if (!issue(retry_.back())) return false;
    retry_.pop_back();
  }
  while (!pending_.empty()) {
    if (free_slots_.empty()) {
      counters_.queue_full.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    Extent& e = pending_.front();
    int32_t staging = -1;
    if (e.staged && !e.chunk) {
      if (free_staging_.empty()) {
        counters_.staging_exhausted.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      staging = static_cast<int32_t>(free_staging_.back());
      uint8_t* stage = engine_.staging->slot(id_, static_cast<uint32_t>(staging));
      if (e.op == IoOp::write && e.batch->kind == MemKind::device) {
        int rc = engine_.mover.load(std::memory_order_acquire)->stage_in(id_, stage, e.mem, e.len);
        if (rc != 0) {  // the GPU copy failed: the extent fails without touching the device
          e.fail(0, engine_.opts.block_size, -rc);
          Batch* b = e.batch;
          pending_.pop_front();
          b->extent_finished();
          continue;
        }
      } else if (e.op == IoOp::write) {
        std::memcpy(stage, e.mem, e.len);
      }
    }
    uint32_t slot = free_slots_.back();
    slots_[slot] = Inflight{e, 0, staging};
    if (!issue(slot)) return false;
    free_slots_.pop_back();
    if (staging >= 0) free_staging_.pop_back();
    pending_.pop_front();
  }
  return true;
}

void Worker::finish(uint32_t slot, int err) {
  Inflight f = slots_[slot];
  free_slots_.push_back(slot);
  if (f.e.chunk) {
    if (err != 0) {
      // The batch fails naming this block; the chunk's other blocks still land. The failed part arrives as
      // zeros (not a previous batch's bytes left in the region).
      f.e.fail(f.done, engine_.opts.block_size, err);
      const uint32_t good = f.done / engine_.opts.block_size * engine_.opts.block_size;  // whole blocks read
      std::memset(f.e.chunk->host + (f.e.mem - f.e.chunk->dst) + good, 0, f.e.len - good);
    }
    return landed(f.e.chunk, f.e.len);
  }
  if (err == 0 && f.e.staged && f.e.op == IoOp::read) {
    uint8_t* stage = engine_.staging->slot(id_, static_cast<uint32_t>(f.staging));
    if (f.e.batch->kind == MemKind::device) {
      queue_copy(f.e.mem, stage, f.e.len);
      copy_gather_.push_back(f);
      return;
    }
    std::memcpy(f.e.mem, stage, f.e.len);
  }
  complete(f, err);
}

void Worker::queue_copy(void* dst, const void* src, uint32_t len) {
  engine_.mover.load(std::memory_order_acquire)->stage_out(id_, dst, src, len);
  if (copy_gather_.empty() && copy_gather_chunks_.empty()) copy_gather_since_ = std::chrono::steady_clock::now();
  copy_gather_bytes_ += len;
  counters_.device_copies.store(counters_.device_copies.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  counters_.device_copy_bytes.store(counters_.device_copy_bytes.load(std::memory_order_relaxed) + len,
                                    std::memory_order_relaxed);
}

void Worker::landed(OrderedChunk* c, uint32_t len) {
  // acq_rel: the last worker sees every other worker's bytes before it copies the chunk.
  if (c->pending.fetch_sub(len, std::memory_order_acq_rel) != len) return;
  queue_copy(c->dst, c->host, c->len);
  copy_gather_chunks_.push_back(c);
}

void Worker::chunk_copied(OrderedChunk* c, int err) {
  OrderedWindow* w = c->window;
  Batch* b = w->batch;
  if (err != 0) b->record_failure({c->first_index, c->first_block, c->first_device, c->first_offset, err});
  // The region goes back only once no copy of any of its chunks can still read it; then the batch is told
  // (its last chunk may end it, and with it the window objects).
  if (w->chunks_left.fetch_sub(1, std::memory_order_acq_rel) == 1) engine_.staging->release(w->region, w->units);
  b->extent_finished();
}

void Worker::flush_copies(bool force) {
  if (copy_gather_.empty() && copy_gather_chunks_.empty()) return;
  // Launch cost is per group (a kernel launch or batched-copy call plus an event, several microseconds of this
  // thread): at full rate a pass reaps one or two 4 KiB completions, so a group per pass made the copies, not
  // the device, bound a worker. The staging slots held meanwhile are few (rate x copy_group_wait_us).
  if (!force && queue_->inflight() > 0 && copy_gather_.size() < limits::copy_group_runs_max &&
      copy_gather_bytes_ < limits::copy_group_bytes_max &&
      std::chrono::steady_clock::now() - copy_gather_since_ < std::chrono::microseconds(limits::copy_group_wait_us)) {
    return;
  }
  uint64_t ticket = engine_.mover.load(std::memory_order_acquire)->flush(id_);
  copy_groups_.push_back({ticket, std::move(copy_gather_), std::move(copy_gather_chunks_)});
  copy_gather_.clear();
  copy_gather_chunks_.clear();
  copy_gather_bytes_ = 0;
}

bool Worker::poll_copies() {
  while (!copy_groups_.empty()) {
    CopyGroup& g = copy_groups_.front();
    int rc = engine_.mover.load(std::memory_order_acquire)->poll(id_, g.ticket);
    if (rc == 0) return true;
    for (Inflight& f : g.extents) {
      f.done = 0;  // a failed copy fails the extent's first block
      complete(f, rc < 0 ? -rc : 0);
    }
    for (OrderedChunk* c : g.chunks) chunk_copied(c, rc < 0 ? -rc : 0);
    copy_groups_.pop_front();
  }
  return false;
}

void Worker::complete(Inflight& f, int err) {
  if (err != 0) f.e.fail(f.done, engine_.opts.block_size, err);
  if (f.staging >= 0) free_staging_.push_back(static_cast<uint32_t>(f.staging));
  Batch* b = f.e.batch;
  b->extent_finished();
}

void Worker::handle(const IoCompletion& c) {
  uint32_t slot = static_cast<uint32_t>(c.user_data);
  Inflight& f = slots_[slot];
  counters_.ops.fetch_add(1, std::memory_order_relaxed);
  if (c.res < 0) return finish(slot, -c.res);
  counters_.bytes.fetch_add(static_cast<uint64_t>(c.res), std::memory_order_relaxed);
  if (c.res == 0) return finish(slot, f.e.op == IoOp::read ? ENODATA : EIO);  // past the end: never silent
  f.done += static_cast<uint32_t>(c.res);
  if (f.done >= f.e.len) return finish(slot, 0);
  counters_.short_transfers.fetch_add(1, std::memory_order_relaxed);
  if (!issue(slot)) retry_.push_back(slot);
}

bool Worker::spin_for_inbox() {
  // A futex wake of a sleeping vCPU costs tens of microseconds on the GPU machine's VM: a short poll first
  // keeps back-to-back small requests (GPU-initiated one-block reads) off that path; longer in low-latency mode.
  const uint32_t us = engine_.poll_depth > 0 ? limits::low_latency_idle_spin_us : limits::worker_spin_us;
  auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < until) {
    if (has_inbox_.load(std::memory_order_acquire) || stop_.load(std::memory_order_acquire)) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  return false;
}

void Worker::sleep_until_posted() {
  uint32_t seen = signal_.load(std::memory_order_acquire);
  sleeping_.store(true, std::memory_order_seq_cst);
  if (!has_inbox_.load(std::memory_order_seq_cst) && !stop_.load(std::memory_order_acquire)) {
    futex_wait(&signal_, seen, 100000000);
  }
  sleeping_.store(false, std::memory_order_relaxed);
}

void Worker::run(std::promise<void>& started) {
  // Named so that a process's engine threads can be told apart (ps -L, /proc/PID/task/*/comm): "gpuio-w3".
  pthread_setname_np(pthread_self(), ("gpuio-w" + std::to_string(id_)).c_str());
  cpu_clock_ok_.store(pthread_getcpuclockid(pthread_self(), &cpu_clock_) == 0, std::memory_order_release);
  try {
    uint32_t depth = engine_.opts.queue_depth;
    queue_ = engine_.backend->create_queue(depth, {engine_.staging->slice_buffer(id_)});
    slots_.resize(depth);
    for (uint32_t i = depth; i-- > 0;) free_slots_.push_back(i);
    for (uint32_t i = engine_.staging->slots_per_slice(); i-- > 0;) free_staging_.push_back(i);
    started.set_value();
  } catch (...) {
    started.set_exception(std::current_exception());
    return;
  }
  std::vector<IoCompletion> cqes(limits::reap_budget_max);
  auto busy_since = Clock::now();
  counters_.busy_since_ns.store(steady_ns(busy_since), std::memory_order_release);
  // Only this thread writes its counters (stats() reads them): a relaxed load + store, no locked add per pass.
  auto add = [](std::atomic<uint64_t>& c, int64_t from, int64_t to) {
    c.store(c.load(std::memory_order_relaxed) + static_cast<uint64_t>(to - from), std::memory_order_relaxed);
  };
  int64_t wait_since = -1;  // when the current wait for a completion (nothing else to do) began
  for (;;) {
    const int64_t t0 = steady_ns(Clock::now());
    bool copying = poll_copies();
    const int64_t t1 = steady_ns(Clock::now());
    take_inbox();
    bool unblocked = prepare_pending();
    const int64_t t2 = steady_ns(Clock::now());
    add(counters_.copy_ns, t0, t1);
    add(counters_.prepare_ns, t1, t2);
    counters_.passes.store(counters_.passes.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (queue_->inflight() > 0) {
      // Block for a completion only when nothing else can be done meanwhile (GPU copies are polled);
      // submitting and waiting is one system call where the backend allows it. Low-latency mode: with a
      // shallow queue (a lone or a few small requests) the worker polls for the completion instead of sleeping
      // in the kernel, for at most limits::low_latency_poll_us per wait; a wake-up from a blocking wait costs
      // several microseconds (tens on a VM), comparable to a fast device's whole latency.
      bool idle = (!unblocked || pending_.empty()) && !has_inbox_.load(std::memory_order_acquire) && !copying &&
                  copy_gather_.empty() && copy_gather_chunks_.empty();
      int wait_min = 0;
      if (idle) {
        if (wait_since < 0) wait_since = t2;
        bool shallow = queue_->inflight() <= engine_.poll_depth &&
                       t2 - wait_since < int64_t{limits::low_latency_poll_us} * 1000;
        if (shallow) {
          counters_.poll_waits.store(counters_.poll_waits.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        } else {
          wait_min = 1;
          counters_.block_waits.store(counters_.block_waits.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        }
      }
      int n = queue_->submit_and_reap(cqes.data(), static_cast<int>(cqes.size()), wait_min);
      GPUIO_ASSERT(n >= 0 || n == -EINTR || n == -EAGAIN || n == -ETIME, "io queue reap failed");
      const int64_t t3 = steady_ns(Clock::now());
      add(counters_.io_ns, t2, t3);  // before handling: a waiter woken by handle() sees this pass's io in stats()
      counters_.device_ns.store(queue_->device_ns(), std::memory_order_relaxed);
      counters_.device_wait_ns.store(queue_->device_wait_ns(), std::memory_order_relaxed);
      for (int i = 0; i < n; ++i) handle(cqes[i]);
      const int64_t t4 = steady_ns(Clock::now());
      flush_copies(false);
      const int64_t t5 = steady_ns(Clock::now());
      add(counters_.handle_ns, t3, t4);
      add(counters_.copy_ns, t4, t5);
      if (n > 0 || !idle) wait_since = -1;
#if defined(__x86_64__) || defined(__i386__)
      if (n <= 0 && wait_min == 0 && idle) __builtin_ia32_pause();
#endif
      continue;
    }
    wait_since = -1;
    flush_copies(true);
    add(counters_.copy_ns, t2, steady_ns(Clock::now()));
    if (copying || !copy_groups_.empty()) continue;
    if (!pending_.empty() || !retry_.empty()) continue;
    if (stop_.load(std::memory_order_acquire) && !has_inbox_.load(std::memory_order_acquire)) break;
    if (engine_.spin) {
      const int64_t s0 = steady_ns(Clock::now());
      bool got = spin_for_inbox();
      add(counters_.idle_ns, s0, steady_ns(Clock::now()));
      if (got) continue;
    }
    auto now = Clock::now();
    counters_.busy_since_ns.store(-1, std::memory_order_release);
    counters_.busy_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(now - busy_since).count(),
                                std::memory_order_release);
    counters_.sleeps.store(counters_.sleeps.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    sleep_until_posted();
    busy_since = Clock::now();
    counters_.busy_since_ns.store(steady_ns(busy_since), std::memory_order_release);
  }
  counters_.busy_since_ns.store(-1, std::memory_order_release);
  counters_.busy_ns.fetch_add(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - busy_since).count(),
      std::memory_order_relaxed);
  queue_.reset();
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) final_cpu_seconds_.store(ts.tv_sec + ts.tv_nsec * 1e-9);
}

}  // namespace gpuio::detail
