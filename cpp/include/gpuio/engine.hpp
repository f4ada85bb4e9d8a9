// The engine (CAM's CPU-managed control plane): devices + layout + staging pool + worker threads.
// Callers hand it batches of logical block ids and a destination (or source); workers own the io
// queues and run them; a batch completes as a whole through its sequence word, or fails naming the first
// failing block, its device, offset and errno. Thread-safe: any thread may submit and wait.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpuio/io.hpp"
#include "gpuio/knobs.hpp"
#include "gpuio/limits.hpp"

namespace gpuio {

// Every knob has one name, the same in C++ and Python (gpuio.Engine keyword = field name here, backend
// fields flattened: direct, writable, sqpoll, iopoll, posix_threads, lock, lock_wait_ms); the Python
// defaults are read from a default-constructed EngineOptions (gpuio._core.engine_defaults()).
struct EngineOptions {
  // The first target's devices (target 0, blocks from 0). Empty: an engine that serves only targets opened later
  // (open_target; uring and posix backends), as a process's shared engine does.
  std::vector<std::string> paths;
  uint32_t block_size = 4096;         // bytes per logical block; a power of two >= every device's logical block
  uint64_t stripe_bytes = limits::stripe_bytes_default;  // RAID-0 stripe unit (used with several devices)
  BackendOptions backend;             // backend.kind: uring | posix | sim | fault:<inner>
  // 0: dynamic: limits::auto_worker_threads(N, CPUs) threads, the controller picks how many work from measured
  // rates (engine/controller.hpp); else fixed
  uint32_t workers = 0;
  uint32_t queue_depth = limits::queue_depth_default;
  uint64_t staging_bytes = limits::staging_bytes_default;
  uint32_t staging_slot_bytes = limits::staging_slot_bytes_default;
  // Shared area for batch-ordered staging of device-memory reads (see limits::ordered_*); 0: every device read
  // goes through per-worker slots.
  uint64_t ordered_staging_bytes = limits::ordered_staging_bytes_default;
  uint32_t io_bytes_max = limits::io_bytes_max;  // merged runs are split at this size
  uint32_t io_timeout_ms = limits::io_timeout_ms_default;
  uint32_t direct_min_bytes = limits::direct_min_bytes_default;  // shorter direct extents are staged; 0: never
  // Low-latency mode: a worker with at most limits::low_latency_inflight_max requests in its ring polls for their
  // completions instead of sleeping in the backend (limits::low_latency_poll_us per wait at most).
  // auto: on where the process may use at least workers + limits::low_latency_spare_cpus CPUs (a polling worker
  // must not take the core its caller needs); on; off.
  std::string low_latency = "auto";
};

// Throws std::invalid_argument "NAME=VALUE must lie in [MIN, MAX]" (block_size: "... a power of two in") from the
// engine's knob table (gpuio/knobs.hpp: engine_knobs()); an unknown name is std::invalid_argument too.
void check_option(const std::string& name, int64_t value);
// Every knob of the table in range plus the relations between them (io_bytes_max >= block_size, ...). Engine::create
// calls it; the error text is the same whichever language set the value.
void validate(const EngineOptions& o);

// A target: one file (or a RAID-0 set of several) that an engine serves beside its others. Per-file choices live
// here; the engine's workers, queues, staging and controller are shared by all of its targets.
struct TargetOptions {
  std::vector<std::string> paths;
  uint64_t stripe_bytes = limits::stripe_bytes_default;  // RAID-0 stripe unit (a multiple of the engine's block_size)
  DeviceOpenOptions open;         // direct, writable, lock, lock_wait_ms
};

// An open target: its blocks are the engine's blocks [base_block, base_block + blocks).
struct TargetInfo {
  uint32_t id = 0;
  uint64_t base_block = 0;
  uint64_t blocks = 0;
  std::vector<DeviceInfo> devices;
};

// Where a batch's data goes to (read) or comes from (write).
enum class MemKind : uint8_t { host = 0, device = 1 };

struct EngineStats {
  uint64_t ops = 0;            // device requests completed
  uint64_t bytes = 0;          // bytes moved to or from devices
  uint64_t batches = 0;
  uint64_t blocks = 0;
  double busy_worker_seconds = 0.0;  // time workers spent with work (not sleeping)
  uint32_t active_workers = 0;
  uint32_t workers = 0;
  uint64_t queue_full_events = 0;    // prepare() found the ring full
  uint64_t staging_exhausted_events = 0;  // a request waited for a staging slot
  uint64_t short_transfers = 0;      // completions shorter than asked, resubmitted
  uint64_t caller_submitted_ops = 0;  // of ops: issued by the submitting thread, finished by the backend's
                                      // library (rbd host batches), no worker involved
  uint64_t caller_queued_ops = 0;     // of those: waited for one of queue_depth x workers slots, then issued by
                                      // the completion that freed it
  uint64_t caller_inflight_max = 0;   // most caller-submitted requests with the library at once
  uint64_t inline_ops = 0;           // of ops: synchronous small reads done by the calling thread (Engine::read)
  uint64_t inline_cached_ops = 0;    // of those: copied from the page cache (a direct device's range it held whole)
  uint64_t worker_adjustments = 0;   // changes made by the core-count controller
  std::string controller;            // its state: "fixed 4", "searching at 2 of 8 (..)", "settled at 6 of 8 (..)"
  uint64_t bytes_direct = 0;         // moved straight between the device and the caller's memory
  uint64_t bytes_staged = 0;         // moved through the staging pool
  // Device-memory reads by staging path: "ordered" (batch-ordered regions, one copy per chunk), "slots" (a
  // staging slot and a copy per extent), "ordered+slots" (both ran), "" (no device read yet).
  std::string staging_mode;
  uint64_t ordered_blocks = 0;       // device-read blocks staged in batch order
  uint64_t slot_blocks = 0;          // device-read blocks staged in per-worker slots
  uint64_t ordered_fallbacks = 0;    // windows that wanted the ordered area, found no room and used slots
  uint64_t device_copies = 0;        // staging->device copies the engine queued (DeviceMover::stage_out calls)
  uint64_t device_copy_bytes = 0;    // their bytes (device_copy_bytes / device_copies: bytes per copy)
  double worker_cpu_seconds = 0.0;   // CPU time the worker threads consumed
  std::string data_path;             // e.g. "uring+direct", "uring+staging", "posix+staging"
  std::string backend;               // backend description (features enabled)
  // Where the time goes, in seconds summed over threads (cheap counters: a few clock reads per worker pass and
  // per batch, none per request). submit: callers planning and posting batches; the rest worker time:
  // prepare (requests into the ring), io (the backend's submit+reap call, a system call for uring, including a
  // blocking wait), device (the part of io inside an emulated device: sim model + data copy; 0 elsewhere),
  // handle (completions: bookkeeping, staging->host copies), copy (staging->GPU launches and polls), signal
  // (publishing a finished batch: controller, state word, futex wake), idle_spin (polling an empty inbox);
  // device_wait (the part of io spent waiting for a paced emulated device's completion to fall due: device time,
  // not host work; 0 elsewhere).
  double submit_seconds = 0, prepare_seconds = 0, io_seconds = 0, device_seconds = 0, handle_seconds = 0;
  double device_wait_seconds = 0;
  double copy_seconds = 0, signal_seconds = 0, idle_spin_seconds = 0;
  uint64_t worker_passes = 0;
  uint64_t poll_waits = 0;   // worker passes that polled for a completion (low-latency mode), not slept
  uint64_t block_waits = 0;  // blocking waits for a completion in the backend
  uint64_t worker_sleeps = 0;  // times a worker ran out of work and slept (a post then pays a futex wake-up)
  std::string latency_mode;  // "low-latency" | "throughput" | "mixed" (both kinds of wait) | "none" (no waits)
  std::string low_latency;   // the option as resolved: "on", "off", "auto: on (16 CPUs for 2 workers)", ...
};

// Moves staged bytes between the staging pool and memory the CPU cannot address (GPU memory). The CUDA
// layer (gpuio/gpu.hpp) installs one; the engine calls it only from worker threads, each passing its own
// worker id, so an implementation keeps per-worker state without locks.
class DeviceMover {
 public:
  virtual ~DeviceMover() = default;
  // Queue a copy of len bytes from staging (host) to dst (device memory); started by the next flush().
  virtual void stage_out(uint32_t worker, void* dst, const void* staging, uint32_t len) = 0;
  // Start the copies queued since the last flush. Returns a ticket for poll().
  virtual uint64_t flush(uint32_t worker) = 0;
  // 1: the ticket's copies are in place; 0: not yet; -errno: they failed. Tickets complete in order.
  virtual int poll(uint32_t worker, uint64_t ticket) = 0;
  // Copy len bytes of device memory src into staging; returns when done: 0 or -errno.
  virtual int stage_in(uint32_t worker, void* staging, const void* src, uint32_t len) = 0;
};

namespace detail {
struct Batch;
class EngineImpl;
}  // namespace detail

// Handle of a submitted batch. Copyable; the batch lives until every handle and the engine are done with it.
class BatchHandle {
 public:
  BatchHandle() = default;
  explicit BatchHandle(std::shared_ptr<detail::Batch> b) : batch_(std::move(b)) {}
  bool done() const;  // completed or failed
  // Block until done or timeout_ms (-1: the engine's io_timeout_ms). Throws IoError on failure
  // (ETIMEDOUT when the deadline passes).
  void wait(int64_t timeout_ms = -1) const;
  uint64_t seq() const;  // the batch's sequence number

 private:
  friend size_t wait_any(const std::vector<BatchHandle>& handles, int64_t timeout_ms);
  std::shared_ptr<detail::Batch> batch_;
};

// Block until one of the batches (all of one engine) is done or failed and return its index (the lowest one
// when several are); wait() on it then gives its result. Lets a caller with several batches in flight refill
// whichever finishes first instead of waiting for them in order. timeout_ms as in wait(): IoError ETIMEDOUT.
// std::invalid_argument for an empty list, an empty handle or batches of different engines.
size_t wait_any(const std::vector<BatchHandle>& handles, int64_t timeout_ms = -1);

class Engine {
 public:
  static std::unique_ptr<Engine> create(const EngineOptions& opts);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Open a file (or a RAID-0 set) as a new target; its blocks get an unused range of this engine's block ids. Only
  // backends that open devices while running (uring, posix) take targets beside the first; the engine's block_size
  // must suit every direct device. Throws IoError naming the path, std::invalid_argument for bad options.
  TargetInfo open_target(const TargetOptions& target);
  // Close a target: new batches naming its blocks fail at once (std::out_of_range), batches in flight on it end
  // first, then its devices close (their locks drop). std::invalid_argument for an unknown id.
  void close_target(uint32_t id);
  // fdatasync the target's devices only.
  void sync_target(uint32_t id);
  size_t target_count() const;  // targets open now

  // Submit a batch. blocks[i] goes to/from buf + i*block_bytes. buf must stay valid until done.
  BatchHandle submit(IoOp op, const int64_t* blocks, size_t n, void* buf, MemKind kind = MemKind::host);
  // Read and wait. One contiguous run of at most limits::inline_bytes_max bytes into host memory is read by the
  // calling thread (from the page cache where it holds the run, else the device: no worker hand-off, EngineStats::
  // inline_ops); anything else is submit() + wait().
  void read(const int64_t* blocks, size_t n, void* buf);
  void write(const int64_t* blocks, size_t n, const void* buf) {
    submit(IoOp::write, blocks, n, const_cast<void*>(buf)).wait();
  }

  EngineStats stats() const;
  // Make completed writes durable (fdatasync on file devices).
  void sync();
  const EngineOptions& options() const;
  uint64_t total_blocks() const;  // the end of the highest target's range (its first target alone: its blocks)
  // Throws std::out_of_range naming the first block id outside [0, total_blocks()) (or in no open target) and its index; submit()
  // checks a whole batch this way before any I/O starts.
  void check_blocks(const int64_t* blocks, size_t n) const;
  size_t device_count() const;  // the devices of the engine's first target (the paths it was created with)
  const DeviceInfo& device(size_t i) const;
  // Stops the workers after the batches in flight end. Later calls throw std::invalid_argument.
  void close();
  bool closed() const;
  // Low-latency mode resolved on (EngineOptions::low_latency): the process has CPUs to spare for polling, and
  // the backend's completions are fast. The GPU control plane then also never naps with a request outstanding.
  bool low_latency_on() const;

  // Device memory (MemKind::device) moves through the staging pool and this mover. Not owned: it must
  // outlive every device batch; set it before the first one (nullptr detaches it when none is in flight).
  void set_device_mover(DeviceMover* mover);
  // The staging pool's memory (registered with io_uring; the CUDA layer also registers it with CUDA).
  FixedBuffer staging_region() const;
  // Page-locks the staging region for CUDA in place (registered = true; the CUDA layer while attached), or undoes
  // it: a block of the process's one pinned pool (gpuio/pinned_pool.hpp counts it). false where CUDA refuses (why:
  // CUDA's words) or the CUDA layer is not built.
  bool set_staging_registered(bool registered, std::string* why = nullptr);

  // Creates (or extends) a file of nbytes for use as a device; fills it with zeros lazily (sparse).
  static void create_file(const std::string& path, uint64_t nbytes);

 private:
  explicit Engine(std::unique_ptr<detail::EngineImpl> impl);
  std::unique_ptr<detail::EngineImpl> impl_;
};

}  // namespace gpuio
