#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "engine/direct.hpp"
#include "engine/engine_impl.hpp"
#include "gpuio/status.hpp"

namespace gpuio::detail {
EngineImpl::EngineImpl(const EngineOptions& o) : opts(o) {
  validate(o);
  const uint32_t bs = o.block_size;
  shared = o.paths.empty();
  GPUIO_EXPECT(!shared || o.backend.kind == "uring" || o.backend.kind == "posix",
               "paths is empty: give at least one file or block device (only the uring and posix backends open "
               "files later, as targets)");
  backend = make_backend(o.paths, o.backend);
  for (size_t i = 0; i < backend->device_count(); ++i) {
    const DeviceInfo& d = backend->device(i);
    if (d.direct) {
      GPUIO_EXPECT(bs >= d.logical_block_bytes && bs % d.logical_block_bytes == 0,
                   "block_size=" + std::to_string(bs) + " is below the logical block size " +
                       std::to_string(d.logical_block_bytes) + " of device '" + d.path + "'");
      direct_align = std::max(direct_align.load(), d.logical_block_bytes);
    }
    zero_copy = zero_copy && d.zero_copy;
    devices.push_back(d);
  }
  zero_copy = zero_copy && !devices.empty();
  backend_name_ = backend->name();
  spin = backend->fast_completions();
  direct_io = backend->direct_submission();
  auto map = std::make_shared<TargetMap>();
  if (!devices.empty()) {
    std::vector<uint32_t> ids;
    for (uint32_t i = 0; i < devices.size(); ++i) ids.push_back(i);
    map->targets.push_back(make_target(0, 0, ids, o.stripe_bytes));
    map->end = next_base_ = map->targets[0]->end();
  }
  targets_ = map;
  uint32_t n = static_cast<uint32_t>(backend->device_count());
  cpu_set_t set;
  uint32_t cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? static_cast<uint32_t>(CPU_COUNT(&set)) : 1;
  // workers=0: threads up to the CPUs (limits::auto_worker_threads), the controller picks how many work, from 1.
  // A backend with slow completions (rbd: a worker per queue of network requests, CPU the OSDs need) keeps CAM's
  // ceil(N/2) threads.
  uint32_t threads = o.workers ? o.workers : spin ? limits::auto_worker_threads(n, cpus) : (n + 1) / 2;
  // A shared engine (no devices yet) starts where a table's engine did (limits::table_workers) and the controller
  // adds workers from there where the whole process's load runs faster with them. It keeps at least that many: on
  // the H200 the demo's loader ran 0.97 s/epoch where the controller could step down while the trainer computed,
  // 0.79 s/epoch with the table's 4 (one run each, same call).
  const uint32_t start = shared ? std::min(threads, limits::table_workers(cpus)) : limits::auto_workers_start(n, threads);
  const uint32_t least = o.workers ? threads : shared ? start : 1;
  controller = std::make_unique<CoreController>(least, threads, o.workers != 0, start);
  staging = std::make_unique<StagingPool>(o.staging_bytes, o.staging_slot_bytes, threads, o.ordered_staging_bytes,
                                          std::max(limits::ordered_chunk_bytes, bs));
  // auto: never on a backend with slow completions (rbd: a poll would take the CPU the OSDs need)
  bool poll = o.low_latency == "on" ||
              (o.low_latency == "auto" && spin && cpus >= threads + limits::low_latency_spare_cpus);
  poll_depth = poll ? limits::low_latency_inflight_max : 0;
  low_latency = o.low_latency != "auto" ? o.low_latency
                : !spin ? std::string("auto: off (") + backend_name_ + ": slow completions)"
                        : "auto: " + std::string(poll ? "on" : "off") + " (" + std::to_string(cpus) + " CPUs for " +
                              std::to_string(threads) + " workers)";
  outbox_.resize(threads);
  direct_slots_ = uint64_t{o.queue_depth} * threads;  // what the worker path would have in flight
  rr_.assign(n, 0);
  for (uint32_t i = 0; i < threads; ++i) workers.push_back(std::make_unique<Worker>(*this, i));
  try {
    for (auto& w : workers) w->start();
  } catch (...) {
    for (auto& w : workers) w->stop();
    throw;
  }
}

EngineImpl::~EngineImpl() { close(); }

void EngineImpl::check_owner() const {
  if (!foreign()) return;
  throw std::runtime_error("this engine belongs to process " + std::to_string(owner_pid) + " and process " +
                           std::to_string(getpid()) + " is a fork of it, without its worker threads: open the "
                           "file again in this process (gpuio objects do so on their own)");
}

uint64_t EngineImpl::completed_requests() const {
  uint64_t n = direct_ops.load(std::memory_order_relaxed);
  for (const auto& w : workers) n += w->counters().ops.load(std::memory_order_relaxed);
  return n;
}

std::string EngineImpl::stall_reason(uint64_t completed_before, const Batch& b) const {
  const uint64_t done = completed_requests() - completed_before;
  const std::string left = std::to_string(b.remaining.load(std::memory_order_relaxed)) + " of its extents pending";
  if (closed_.load()) return left + ", and the engine was closed under it";
  if (done == 0) return left + ", and no device request completed meanwhile (device stalled?)";
  return left + " behind other work (" + std::to_string(done) + " requests completed meanwhile): the engine is "
         "busy, not stalled; wait longer (io_timeout_ms) or submit less at once";
}

void EngineImpl::close() {
  if (foreign()) {  // the parent's threads, locks and memory: leave them untouched, forever
    closed_.store(true);
    for (auto& w : workers) (void)w.release();
    workers.clear();
    (void)backend.release();
    (void)staging.release();
    return;
  }
  {
    std::lock_guard<std::mutex> g(submit_mu_);  // a submit either finished posting or sees closed_
    if (closed_.exchange(true) && !backend) return;
  }
  for (auto& w : workers) w->stop();  // after the batches in flight ended
  wait_direct();
  wait_inline();
  if (backend) {
    backend_description_ = backend->describe();
    backend.reset();  // closes the devices and drops their locks now, not when Python collects us
  }
}

size_t EngineImpl::direct_admit(DirectBatch& b) {
  std::lock_guard<std::mutex> g(direct_mu_);  // counted before close() can look: it waits for these
  direct_inflight_ += b.ops.size();
  size_t now = 0;
  if (direct_queue_.empty()) {  // FIFO: a new batch never passes ops already waiting
    now = static_cast<size_t>(std::min<uint64_t>(b.ops.size(), direct_slots_ - direct_issued_));
    direct_issued_ += now;
    direct_issued_max_ = std::max(direct_issued_max_, direct_issued_);
  }
  for (size_t i = now; i < b.ops.size(); ++i) direct_queue_.push_back(&b.ops[i]);
  direct_queued_total_ += b.ops.size() - now;
  return now;
}

DirectOp* EngineImpl::direct_release() {
  std::lock_guard<std::mutex> g(direct_mu_);
  DirectOp* next = nullptr;
  if (!direct_queue_.empty()) {  // the slot passes to the oldest waiting op
    next = direct_queue_.front();
    direct_queue_.pop_front();
  } else {
    --direct_issued_;
  }
  if (--direct_inflight_ == 0) direct_cv_.notify_all();
  return next;
}

void EngineImpl::wait_direct() {
  std::unique_lock<std::mutex> g(direct_mu_);
  direct_cv_.wait(g, [&] { return direct_inflight_ == 0; });
}

void EngineImpl::sync() {
  check_owner();
  GPUIO_EXPECT(!closed_.load(), "engine is closed");
  backend->sync();
}

uint32_t EngineImpl::pick_worker(uint32_t device, uint32_t active) {
  // A shared engine's files are not loaded alike (one busy table beside 29 idle ones): each device's extents go
  // round all active workers, starting at a different worker per device. An engine over its own devices spreads
  // them so that every worker gets the same share (spread_worker).
  if (shared) return (rr_[device]++ + device) % active;
  return spread_worker(device, static_cast<uint32_t>(rr_.size()), active, rr_[device]++);
}

std::shared_ptr<Target> EngineImpl::make_target(uint32_t id, uint64_t base, const std::vector<uint32_t>& ids,
                                                uint64_t stripe_bytes) {
  std::vector<uint64_t> sizes;
  for (uint32_t d : ids) sizes.push_back(backend->device(d).bytes);
  return std::make_shared<Target>(id, base, Layout(sizes, opts.block_size, stripe_bytes), ids);
}

Location EngineImpl::locate(Batch& b, const TargetMap& map, uint64_t block, uint64_t* contiguous) {
  const ptrdiff_t k = map.find(block);  // submit checked every block against this map
  const std::shared_ptr<Target>& t = map.targets[static_cast<size_t>(k)];
  if (b.targets.empty() || (b.targets.back() != t && std::find(b.targets.begin(), b.targets.end(), t) == b.targets.end())) {
    t->batches.fetch_add(1, std::memory_order_acq_rel);
    b.targets.push_back(t);
  }
  const uint64_t rel = block - t->base;
  *contiguous = t->layout.contiguous_from(rel);
  Location loc = t->layout.map(rel);
  loc.device = t->devices[loc.device];
  return loc;
}

std::string EngineImpl::device_path(uint32_t device) const {
  if (device < devices.size()) return devices[device].path;
  return backend && device < backend->device_count() ? backend->device(device).path : "device " + std::to_string(device);
}

TargetInfo EngineImpl::open_target(const TargetOptions& t) {
  check_owner();
  GPUIO_EXPECT(!closed_.load(), "engine is closed");
  GPUIO_EXPECT(!t.paths.empty(), "a target needs at least one file or block device, got an empty list");
  GPUIO_EXPECT(t.paths.size() <= limits::devices_max, "too many devices for one target: " +
                                                         std::to_string(t.paths.size()) + " > devices_max " +
                                                         std::to_string(limits::devices_max));
  check_option("stripe_bytes", static_cast<int64_t>(t.stripe_bytes));
  const uint32_t bs = opts.block_size;
  std::lock_guard<std::mutex> tg(targets_mu_);
  std::vector<uint32_t> ids = backend->open_devices(t.paths, t.open);
  std::shared_ptr<Target> target;
  TargetInfo info;
  uint32_t align = 0;
  try {
    for (uint32_t d : ids) {
      const DeviceInfo& dev = backend->device(d);
      if (dev.direct) {
        GPUIO_EXPECT(bs >= dev.logical_block_bytes && bs % dev.logical_block_bytes == 0,
                     "the engine's block_size=" + std::to_string(bs) + " is below the logical block size " +
                         std::to_string(dev.logical_block_bytes) + " of device '" + dev.path + "'");
        align = std::max(align, dev.logical_block_bytes);
      }
      info.devices.push_back(dev);
    }
    target = make_target(next_target_id_, 0, ids, t.stripe_bytes);
  } catch (...) {
    backend->close_devices(ids);
    throw;
  }
  {
    std::lock_guard<std::mutex> g(submit_mu_);
    if (closed_.load()) {
      backend->close_devices(ids);
      throw std::invalid_argument("engine is closed");
    }
    target->base = next_base_;
    next_base_ = target->end();
    ++next_target_id_;
    auto map = std::make_shared<TargetMap>(*std::atomic_load(&targets_));
    map->targets.push_back(target);  // bases only grow: the order holds
    map->end = std::max(map->end, target->end());
    std::atomic_store(&targets_, std::shared_ptr<const TargetMap>(map));
    if (rr_.size() < backend->device_count()) rr_.resize(backend->device_count(), 0);
    if (align > direct_align.load()) direct_align.store(align);
    zero_copy = false;  // fd backends: O_DIRECT alignment or the page cache, never any memory
  }
  info.id = target->id;
  info.base_block = target->base;
  info.blocks = target->layout.total_blocks();
  return info;
}

void EngineImpl::close_target(uint32_t id) {
  if (foreign()) return;  // a forked child: the devices are the parent's too; its engine is abandoned
  std::lock_guard<std::mutex> tg(targets_mu_);
  std::shared_ptr<Target> target;
  {
    std::lock_guard<std::mutex> g(submit_mu_);  // a batch is planned against the old map or the new one, whole
    auto old = std::atomic_load(&targets_);
    auto map = std::make_shared<TargetMap>();
    for (const auto& t : old->targets) {
      if (t->id == id) target = t;
      else map->targets.push_back(t), map->end = std::max(map->end, t->end());
    }
    GPUIO_EXPECT(target != nullptr, "no open target " + std::to_string(id) + " in this engine");
    std::atomic_store(&targets_, std::shared_ptr<const TargetMap>(map));
  }
  target->wait_idle();  // batches planned against the old map end (all their extents) first
  if (backend && !closed_.load()) backend->close_devices(target->devices);
}

void EngineImpl::sync_target(uint32_t id) {
  check_owner();
  GPUIO_EXPECT(!closed_.load(), "engine is closed");
  auto map = std::atomic_load(&targets_);
  for (const auto& t : map->targets) {
    if (t->id == id) return backend->sync_devices(t->devices);
  }
  throw std::invalid_argument("no open target " + std::to_string(id) + " in this engine");
}

uint32_t EngineImpl::plan_range(Batch& b, const TargetMap& map, const int64_t* blocks, size_t lo, size_t hi,
                                uint8_t* mem, bool staged, OrderedChunk* chunk, bool direct) {
  const uint32_t bs = opts.block_size;
  const uint64_t run_max =
      (staged && !chunk ? std::min(opts.io_bytes_max, opts.staging_slot_bytes) : opts.io_bytes_max) / bs;
  const uint32_t active = controller->active();
  b.planned_workers = active;
  const uint64_t small = direct_align.load(std::memory_order_relaxed) != 0 ? opts.direct_min_bytes : 0;  // see limits::direct_min_bytes_default
  uint32_t extents = 0;
  uint64_t staged_bytes = 0;
  for (size_t i = lo; i < hi;) {
    uint64_t first = static_cast<uint64_t>(blocks[i]);
    uint64_t contiguous = 0;
    Location loc = locate(b, map, first, &contiguous);
    uint64_t limit = std::min<uint64_t>(run_max, contiguous);
    size_t run = 1;
    while (i + run < hi && run < limit && static_cast<uint64_t>(blocks[i + run]) == first + run) ++run;
    Extent e;
    e.batch = &b;
    e.mem = mem + i * bs;
    e.offset = loc.offset;
    e.first_index = i;
    e.first_block = static_cast<int64_t>(first);
    e.len = static_cast<uint32_t>(run * bs);
    e.device = static_cast<uint16_t>(loc.device);
    e.op = b.op;
    e.staged = staged || e.len < small;
    e.chunk = chunk;
    if (e.staged) staged_bytes += e.len;
    outbox_[direct ? 0 : pick_worker(loc.device, active)].push_back(e);
    ++extents;
    i += run;
  }
  bytes_staged_.fetch_add(staged_bytes, std::memory_order_relaxed);
  bytes_direct_.fetch_add((hi - lo) * bs - staged_bytes, std::memory_order_relaxed);
  return extents;
}

void EngineImpl::plan(Batch& b, const TargetMap& map, const int64_t* blocks, size_t n, uint8_t* mem, bool staged,
                      bool direct) {
  const uint32_t bs = opts.block_size;
  const bool device_read = b.kind == MemKind::device && b.op == IoOp::read;
  if (!device_read || staging->ordered_bytes() == 0 || uint64_t{n} * bs < limits::ordered_min_bytes) {
    if (device_read) slot_blocks_.fetch_add(n, std::memory_order_relaxed);
    b.remaining.store(plan_range(b, map, blocks, 0, n, mem, staged, nullptr, direct), std::memory_order_release);
    return;
  }
  // Batch-ordered staging (engine/ordered.hpp), window by window; a window the area cannot hold now goes the
  // per-slot path rather than wait (submit never blocks on staging).
  const uint32_t unit = staging->unit_bytes();
  const size_t chunk_blocks = unit / bs, window_blocks = limits::ordered_window_bytes / bs;
  uint32_t count = 0;
  for (size_t lo = 0; lo < n; lo += window_blocks) {
    const size_t hi = std::min(n, lo + window_blocks);
    const uint32_t chunks = static_cast<uint32_t>((hi - lo + chunk_blocks - 1) / chunk_blocks);
    uint8_t* region = staging->acquire(chunks);
    if (region == nullptr) {
      ordered_fallbacks_.fetch_add(1, std::memory_order_relaxed);
      slot_blocks_.fetch_add(hi - lo, std::memory_order_relaxed);
      count += plan_range(b, map, blocks, lo, hi, mem, staged, nullptr, false);
      continue;
    }
    auto w = std::make_unique<OrderedWindow>();
    w->batch = &b;
    w->region = region;
    w->units = chunks;
    w->chunk_count = chunks;
    w->chunks = std::make_unique<OrderedChunk[]>(chunks);
    w->chunks_left.store(chunks, std::memory_order_relaxed);
    for (uint32_t c = 0; c < chunks; ++c) {
      const size_t clo = lo + c * chunk_blocks, chi = std::min(hi, clo + chunk_blocks);
      OrderedChunk& k = w->chunks[c];
      k.window = w.get();
      k.host = region + static_cast<uint64_t>(c) * unit;
      k.dst = mem + clo * bs;
      k.len = static_cast<uint32_t>((chi - clo) * bs);
      k.first_index = clo;
      k.first_block = blocks[clo];
      uint64_t contiguous = 0;
      Location loc = locate(b, map, static_cast<uint64_t>(blocks[clo]), &contiguous);
      k.first_device = loc.device;
      k.first_offset = loc.offset;
      k.pending.store(k.len, std::memory_order_relaxed);
    }
    for (uint32_t c = 0; c < chunks; ++c) {
      const size_t clo = lo + c * chunk_blocks, chi = std::min(hi, clo + chunk_blocks);
      plan_range(b, map, blocks, clo, chi, mem, true, &w->chunks[c], false);
    }
    count += chunks;  // a chunk finishes (once) for all of its extents
    ordered_blocks_.fetch_add(hi - lo, std::memory_order_relaxed);
    b.windows.push_back(std::move(w));
  }
  b.remaining.store(count, std::memory_order_release);
}

namespace {
void check_blocks_in(const TargetMap& map, const int64_t* blocks, size_t n) {
  auto bad = [&](size_t i, const char* why) {
    throw std::out_of_range("block " + std::to_string(blocks[i]) + " at index " + std::to_string(i) + why);
  };
  if (map.targets.size() == 1 && map.targets[0]->base == 0) {  // an engine over its own devices
    for (size_t i = 0; i < n; ++i) {
      if (blocks[i] < 0 || static_cast<uint64_t>(blocks[i]) >= map.end)
        bad(i, (" is out of range [0, " + std::to_string(map.end) + ")").c_str());
    }
    return;
  }
  const Target* last = nullptr;  // runs of one target's blocks skip the search
  for (size_t i = 0; i < n; ++i) {
    if (blocks[i] < 0 || static_cast<uint64_t>(blocks[i]) >= map.end)
      bad(i, (" is out of range [0, " + std::to_string(map.end) + ")").c_str());
    const uint64_t b = static_cast<uint64_t>(blocks[i]);
    if (last != nullptr && b >= last->base && b < last->end()) continue;
    const ptrdiff_t k = map.find(b);
    if (k < 0) bad(i, " lies in no open file of this engine (its target was closed)");
    last = map.targets[static_cast<size_t>(k)].get();
  }
}
}  // namespace

void EngineImpl::check_blocks(const int64_t* blocks, size_t n) const { check_blocks_in(*target_map(), blocks, n); }

BatchHandle EngineImpl::submit(IoOp op, const int64_t* blocks, size_t n, void* buf, MemKind kind) {
  check_owner();
  GPUIO_EXPECT(!closed_.load(), "engine is closed");
  GPUIO_EXPECT(n <= limits::batch_blocks_max, "batch of " + std::to_string(n) + " blocks exceeds batch_blocks_max=" +
                                                   std::to_string(limits::batch_blocks_max));
  GPUIO_EXPECT(n == 0 || buf != nullptr, "null buffer for a batch of " + std::to_string(n) + " blocks");
  GPUIO_EXPECT(kind == MemKind::host || mover.load(std::memory_order_acquire) != nullptr,
               "device memory needs the CUDA layer attached to this engine (gpuio.gpu); none is");
  std::shared_ptr<const TargetMap> map = target_map();
  check_blocks_in(*map, blocks, n);  // all before any I/O starts: a bad batch touches nothing
  // Host batches on a backend that takes requests from any thread skip the workers (engine/direct.hpp).
  const uint32_t align = direct_align.load(std::memory_order_relaxed);
  const bool staged = kind == MemKind::device || (align != 0 && reinterpret_cast<uintptr_t>(buf) % align != 0);
  const bool direct = direct_io && !staged && align == 0;
  std::shared_ptr<Batch> b = direct ? std::make_shared<DirectBatch>() : std::make_shared<Batch>();
  b->seq = next_seq_.fetch_add(1);
  b->blocks = n;
  b->op = op;
  b->kind = kind;
  b->engine = this;
  b->io_timeout_ms = opts.io_timeout_ms;
  b->spin = spin;
  if (n == 0) {
    b->state.store(kDone);
    return BatchHandle(b);
  }
  const auto t_start = Clock::now();
  std::unique_lock<std::mutex> g(submit_mu_);
  GPUIO_EXPECT(!closed_.load(), "engine is closed");
  if (std::shared_ptr<const TargetMap> now = target_map(); now != map) {  // a target opened or closed meanwhile
    map = std::move(now);
    check_blocks_in(*map, blocks, n);  // throws with the lock released by g's destructor
  }
  {
    std::lock_guard<std::mutex> g(timing_mu_);
    b->submitted = Clock::now();
    b->compute_seconds = in_flight_batches_ == 0 ? std::chrono::duration<double>(b->submitted - last_done_).count() : 0;
    ++in_flight_batches_;
  }
  batches_.fetch_add(1, std::memory_order_relaxed);
  blocks_.fetch_add(n, std::memory_order_relaxed);
  b->self = b;
  plan(*b, *map, blocks, n, static_cast<uint8_t*>(buf), staged, direct);
  if (direct) {
    auto& d = static_cast<DirectBatch&>(*b);
    d.ops.resize(outbox_[0].size());
    for (size_t i = 0; i < d.ops.size(); ++i) d.ops[i].e = outbox_[0][i];
    outbox_[0].clear();
    g.unlock();  // other submitters plan meanwhile; b (held here) outlives the loop even if all complete
    issue_direct(*this, d);  // counts its ops in flight before issuing any (close() waits for them)
  } else {
    for (size_t w = 0; w < outbox_.size(); ++w) {
      if (!outbox_[w].empty()) workers[w]->post(outbox_[w]);
    }
  }
  submit_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t_start).count(),
                      std::memory_order_relaxed);
  return BatchHandle(b);
}

void EngineImpl::on_batch_done(Batch& b) {
  auto now = Clock::now();
  double io, compute;
  {
    std::lock_guard<std::mutex> g(timing_mu_);
    --in_flight_batches_;
    last_done_ = now;
    io = std::chrono::duration<double>(now - b.submitted).count();
    compute = b.compute_seconds;
  }
  controller->observe(io, compute, b.blocks, std::chrono::duration<double>(now.time_since_epoch()).count(),
                     b.planned_workers);
  for (const auto& t : b.targets) t->batch_ended();  // every extent of b has ended: its targets may close
}

EngineStats EngineImpl::stats() const {
  EngineStats s;
  double busy_seconds = 0;
  auto secs = [](const std::atomic<uint64_t>& ns) { return ns.load(std::memory_order_relaxed) * 1e-9; };
  for (const auto& w : workers) {
    const WorkerCounters& c = w->counters();
    s.prepare_seconds += secs(c.prepare_ns);
    s.io_seconds += secs(c.io_ns);
    s.device_seconds += secs(c.device_ns);
    s.device_wait_seconds += secs(c.device_wait_ns);
    s.handle_seconds += secs(c.handle_ns);
    s.copy_seconds += secs(c.copy_ns);
    s.idle_spin_seconds += secs(c.idle_ns);
    s.worker_passes += c.passes.load(std::memory_order_relaxed);
    s.poll_waits += c.poll_waits.load(std::memory_order_relaxed);
    s.block_waits += c.block_waits.load(std::memory_order_relaxed);
    s.worker_sleeps += c.sleeps.load(std::memory_order_relaxed);
    s.ops += c.ops.load(std::memory_order_relaxed);
    s.bytes += c.bytes.load(std::memory_order_relaxed);
    s.queue_full_events += c.queue_full.load(std::memory_order_relaxed);
    s.staging_exhausted_events += c.staging_exhausted.load(std::memory_order_relaxed);
    s.short_transfers += c.short_transfers.load(std::memory_order_relaxed);
    s.device_copies += c.device_copies.load(std::memory_order_relaxed);
    s.device_copy_bytes += c.device_copy_bytes.load(std::memory_order_relaxed);
    busy_seconds += w->busy_seconds();
    s.worker_cpu_seconds += w->cpu_seconds();
  }
  s.ops += direct_ops.load(std::memory_order_relaxed);
  s.bytes += direct_bytes.load(std::memory_order_relaxed);
  s.short_transfers += direct_short.load(std::memory_order_relaxed);
  s.caller_submitted_ops = direct_ops.load(std::memory_order_relaxed);
  s.inline_ops = inline_ops.load(std::memory_order_relaxed);
  s.inline_cached_ops = inline_cached_ops.load(std::memory_order_relaxed);
  s.ops += s.inline_ops;
  s.bytes += inline_bytes.load(std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> g(direct_mu_);
    s.caller_queued_ops = direct_queued_total_;
    s.caller_inflight_max = direct_issued_max_;
  }
  s.busy_worker_seconds = busy_seconds;
  s.low_latency = low_latency;
  s.submit_seconds = secs(submit_ns);
  s.signal_seconds = secs(signal_ns);
  s.latency_mode = s.poll_waits && s.block_waits ? "mixed"
                   : s.poll_waits                ? "low-latency"
                   : s.block_waits               ? "throughput"
                                                 : "none";
  s.batches = batches_.load(std::memory_order_relaxed);
  s.blocks = blocks_.load(std::memory_order_relaxed);
  s.bytes_direct = bytes_direct_.load(std::memory_order_relaxed);
  s.bytes_staged = bytes_staged_.load(std::memory_order_relaxed);
  s.ordered_blocks = ordered_blocks_.load(std::memory_order_relaxed);
  s.slot_blocks = slot_blocks_.load(std::memory_order_relaxed);
  s.ordered_fallbacks = ordered_fallbacks_.load(std::memory_order_relaxed);
  s.staging_mode = s.ordered_blocks && s.slot_blocks ? "ordered+slots"
                   : s.ordered_blocks                ? "ordered"
                   : s.slot_blocks                   ? "slots"
                                                     : "";
  s.workers = static_cast<uint32_t>(workers.size());
  s.active_workers = controller->active();
  s.worker_adjustments = controller->adjustments();
  s.controller = controller->state();
  const std::string& kind = backend_name_;
  if (s.bytes_direct > 0 || s.bytes_staged == 0)
    s.data_path = kind + (direct_align.load() || zero_copy ? "+direct" : "+pagecache");
  if (s.bytes_staged > 0) s.data_path += (s.data_path.empty() ? "" : ",") + kind + "+staging";
  s.backend = backend ? backend->describe() : backend_description_;
  return s;
}

}  // namespace gpuio::detail

namespace gpuio {

Engine::Engine(std::unique_ptr<detail::EngineImpl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::create(const EngineOptions& opts) {
  return std::unique_ptr<Engine>(new Engine(std::make_unique<detail::EngineImpl>(opts)));
}

BatchHandle Engine::submit(IoOp op, const int64_t* blocks, size_t n, void* buf, MemKind kind) {
  return impl_->submit(op, blocks, n, buf, kind);
}

void Engine::read(const int64_t* blocks, size_t n, void* buf) {
  if (!impl_->read_inline(blocks, n, buf)) submit(IoOp::read, blocks, n, buf).wait();
}

EngineStats Engine::stats() const { return impl_->stats(); }
const EngineOptions& Engine::options() const { return impl_->opts; }
uint64_t Engine::total_blocks() const { return impl_->target_map()->end; }
TargetInfo Engine::open_target(const TargetOptions& t) { return impl_->open_target(t); }
void Engine::close_target(uint32_t id) { impl_->close_target(id); }
void Engine::sync_target(uint32_t id) { impl_->sync_target(id); }
size_t Engine::target_count() const { return impl_->target_map()->targets.size(); }
void Engine::check_blocks(const int64_t* blocks, size_t n) const { impl_->check_blocks(blocks, n); }

size_t Engine::device_count() const { return impl_->devices.size(); }
const DeviceInfo& Engine::device(size_t i) const { return impl_->devices.at(i); }
void Engine::close() { impl_->close(); }
void Engine::set_device_mover(DeviceMover* m) { impl_->mover.store(m, std::memory_order_release); }
FixedBuffer Engine::staging_region() const { return {impl_->staging->base(), impl_->staging->bytes()}; }
bool Engine::set_staging_registered(bool registered, std::string* why) {
  return impl_->staging->set_registered(registered, why);
}
bool Engine::closed() const { return impl_->closed(); }
bool Engine::low_latency_on() const { return impl_->poll_depth > 0; }
void Engine::sync() { impl_->sync(); }

void Engine::create_file(const std::string& path, uint64_t nbytes) {
  int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(errno, "cannot create '" + path + "': " + detail::errno_name(errno));
  struct stat st {};
  int rc = fstat(fd, &st);
  if (rc == 0 && static_cast<uint64_t>(st.st_size) < nbytes) rc = ftruncate(fd, static_cast<off_t>(nbytes));
  int err = errno;
  ::close(fd);
  if (rc != 0) throw IoError(err, "cannot size '" + path + "' to " + std::to_string(nbytes) + " bytes: " +
                                      detail::errno_name(err));
}

}  // namespace gpuio
