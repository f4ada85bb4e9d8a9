// Engine internals shared by the engine's files (not a public header).
#pragma once
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/batch.hpp"
#include "engine/controller.hpp"
#include "engine/fork.hpp"
#include "engine/layout.hpp"
#include "engine/staging.hpp"
#include "engine/targets.hpp"
#include "engine/worker.hpp"
#include "gpuio/engine.hpp"

namespace gpuio::detail {

struct DirectBatch;  // engine/direct.hpp
struct DirectOp;

class EngineImpl {
 public:
  explicit EngineImpl(const EngineOptions& opts);
  ~EngineImpl();

  BatchHandle submit(IoOp op, const int64_t* blocks, size_t n, void* buf, MemKind kind);
  // A synchronous host read of one contiguous run of at most limits::inline_bytes_max bytes, done on the calling
  // thread (engine/inline_read.cpp). false: not such a read (or not here): submit it. Throws IoError on failure.
  bool read_inline(const int64_t* blocks, size_t n, void* buf);
  void wait_inline() const;  // until no inline read runs (close(), before the backend goes)
  std::atomic<bool> inline_ok{true};  // false once the backend said it has no read_now
  std::atomic<uint64_t> inline_ops{0}, inline_bytes{0}, inline_cached_ops{0};  // stats
  void check_blocks(const int64_t* blocks, size_t n) const;  // out_of_range naming the first bad id
  TargetInfo open_target(const TargetOptions& t);
  void close_target(uint32_t id);
  void sync_target(uint32_t id);
  std::shared_ptr<const TargetMap> target_map() const { return std::atomic_load(&targets_); }
  std::string device_path(uint32_t device) const;  // for messages: the path of a device index
  void on_batch_done(Batch& b);  // from the worker that finished the batch's last extent
  EngineStats stats() const;
  void close();
  void sync();
  bool closed() const { return closed_.load(); }
  // The process that made the engine. After fork() the child has none of its worker threads: close() there
  // abandons the engine (no thread joined, no lock taken, nothing freed) and submit() refuses, naming both pids.
  const pid_t owner_pid = getpid();
  const uint32_t owner_fork = fork_generation();
  bool foreign() const { return fork_generation() != owner_fork; }
  void check_owner() const;  // std::runtime_error in a forked child
  uint64_t completed_requests() const;  // device requests completed so far (workers and caller-submitted)
  // Why a batch is still running after a wait: the device answered nothing since `completed_before` (stalled?), or
  // it kept completing other requests (a deep backlog), with the batch's pending extents.
  std::string stall_reason(uint64_t completed_before, const Batch& b) const;

  EngineOptions opts;
  std::unique_ptr<IoBackend> backend;
  bool spin = true;  // backend->fast_completions(): workers and batch waits poll briefly before sleeping
  bool direct_io = false;  // backend->direct_submission(): host batches skip the workers (engine/direct.hpp)
  std::unique_ptr<StagingPool> staging;
  std::unique_ptr<CoreController> controller;
  std::vector<std::unique_ptr<Worker>> workers;
  std::atomic<DeviceMover*> mover{nullptr};  // set by the CUDA layer for MemKind::device batches
  // Memory alignment O_DIRECT needs on any open device (0: none is direct); grows as targets open.
  std::atomic<uint32_t> direct_align{0};
  bool zero_copy = true;      // every device moves data straight to/from any caller memory (rbd)
  bool shared = false;        // made without paths: a process's engine whose targets come and go (worker choice)
  uint32_t poll_depth = 0;    // low-latency mode: workers poll with at most this many requests in flight (0: off)
  std::string low_latency;    // how opts.low_latency resolved (stats)
  std::vector<DeviceInfo> devices;  // kept after close(), which releases the backend (fds, locks)

 private:
  // direct: the caller submits the batch's extents itself (outbox 0, IoBackend::submit_direct; host batches on rbd)
  void plan(Batch& b, const TargetMap& map, const int64_t* blocks, size_t n, uint8_t* mem, bool staged, bool direct);
  // Extents of blocks [lo, hi) into the outboxes; chunk: batch-ordered staging (then always staged). Returns
  // how many.
  uint32_t plan_range(Batch& b, const TargetMap& map, const int64_t* blocks, size_t lo, size_t hi, uint8_t* mem,
                      bool staged, OrderedChunk* chunk, bool direct);
  // Where engine block `block` lives (the target must hold it); counts the batch in that target's batches.
  Location locate(Batch& b, const TargetMap& map, uint64_t block, uint64_t* contiguous);
  std::shared_ptr<Target> make_target(uint32_t id, uint64_t base, const std::vector<uint32_t>& devices,
                                      uint64_t stripe_bytes);
  void wait_direct();  // until no caller-submitted request is in flight
  uint32_t pick_worker(uint32_t device, uint32_t active);

  std::string backend_name_, backend_description_;
  std::atomic<uint64_t> next_seq_{1};
  std::atomic<uint32_t> inline_readers_{0};  // inline reads between the submit lock and their end
  std::atomic<bool> closed_{false};
  std::mutex submit_mu_;  // serialises planning so per-worker vectors can be reused
  std::vector<std::vector<Extent>> outbox_;
  std::vector<uint32_t> rr_;  // per device: its extents so far (spread_worker's turn)
  std::shared_ptr<const TargetMap> targets_;  // std::atomic_load/store; replaced under submit_mu_
  std::mutex targets_mu_;     // serialises open_target/close_target
  uint32_t next_target_id_ = 1;
  uint64_t next_base_ = 0;    // the next target's first engine block (ranges are never reused)

  mutable std::mutex timing_mu_;
  uint32_t in_flight_batches_ = 0;
  Clock::time_point last_done_ = Clock::now();
  std::atomic<uint64_t> batches_{0}, blocks_{0}, bytes_direct_{0}, bytes_staged_{0};
  std::atomic<uint64_t> ordered_blocks_{0}, slot_blocks_{0}, ordered_fallbacks_{0};  // device reads by staging path

 public:
  // Bumped as each batch ends; wait_any() sleeps on it (a futex) while any_waiters says someone does.
  std::atomic<uint32_t> batches_ended{0}, any_waiters{0};
  std::atomic<uint64_t> submit_ns{0}, signal_ns{0};  // stage counters of EngineStats (callers, batch publication)
  // The caller-submitted path (engine/direct.cpp): completions, bytes, short transfers; requests in flight.
  std::atomic<uint64_t> direct_ops{0}, direct_bytes{0}, direct_short{0};
  // Slots for a new batch's ops: how many of b.ops (from the front) to issue now; the rest are queued.
  size_t direct_admit(DirectBatch& b);
  // One caller-submitted request finished (last thing its completion does). Returns the queued op that takes
  // its slot (the caller issues it), or nullptr.
  DirectOp* direct_release();

 private:
  mutable std::mutex direct_mu_;  // guards the fields below, so close() cannot return while a completion still runs
  std::condition_variable direct_cv_;
  uint64_t direct_inflight_ = 0;  // ops submitted and not finished (queued ones included)
  uint64_t direct_issued_ = 0;    // of those, holding a slot (with the library)
  uint64_t direct_slots_ = 0;     // queue_depth x worker threads
  std::deque<DirectOp*> direct_queue_;  // ops waiting for a slot, oldest first
  uint64_t direct_queued_total_ = 0, direct_issued_max_ = 0;  // stats: caller_queued_ops, caller_inflight_max
};

}  // namespace gpuio::detail
