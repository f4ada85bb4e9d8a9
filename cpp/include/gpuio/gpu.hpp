// The GPU path (CAM, DESIGN.md layer 3), host side. Plain C++: no CUDA header needed to include it.
//
// A GpuRuntime attaches to an Engine and gives it:
//  - a DeviceMover: staging pool registered with CUDA (mapped pinned memory, on top of its io_uring fixed
//    buffer registration); staged reads land on the GPU by copy engine (one copy per contiguous run, batched);
//  - GPU->CPU request rings with doorbell words in host-mapped memory, polled by one control-plane thread,
//    and CPU->GPU completion sequence words (GpuQueueShared), used by device code through device.cuh;
//  - the stream-ordered path: a request waited for in stream order, its data moved in stream order.
//
// The stream-ordered path's rule (docs/decisions/0001): no GPU-side wait may depend on a CUDA call that a host thread
// has yet to make. A thread making a context-synchronising call (cudaFree, module or library loading,
// cuBLAS handle creation) holds the driver's context lock while it waits for the device to go idle; every
// other thread's CUDA call blocks on that lock. If the device is then holding a stream wait whose release
// needs such a call (an engine worker launching the staging->GPU copy), nothing moves again: that is how
// `gpuio demo` deadlocked on the H200 and H100 at 1cf507e. So stream-ordered requests read into a pinned
// bounce region (host memory: the engine makes no CUDA call), the CPU learns the block ids from host-mapped
// memory (no cudaMemcpy), and the bounce->GPU copy is enqueued on the caller's stream at submit time,
// after the wait. The device API (device.cuh, kernels waiting in prefetch_synchronize) still relies on the
// engine's copies: see its header.
// GpuEngine bundles an Engine with its runtime: CAM's host API (create, alloc, free, queue(i)).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpuio/engine.hpp"

namespace gpuio {

namespace gpu_limits {
constexpr uint32_t queues_max = 256;                 // device-API queues per runtime
constexpr uint32_t queue_ring_slots = 64;            // requests in flight per queue (power of two)
constexpr uint32_t request_inline_ids_max = 16;      // ids carried in the request itself (no GPU copy)
constexpr uint32_t request_blocks_max = 1u << 20;    // ids in one GPU request (control plane copy buffer)
constexpr uint32_t stream_cells_max = 1u << 16;      // stream-ordered calls in flight (ring of cells)
constexpr uint32_t copy_events_max = 4096;           // staging->GPU copy groups in flight per worker
constexpr uint32_t bounce_slots = 16;                // stream path: the bounce pool's slots; a request is
                                                     // cut into slot-sized chunks, this many in flight
constexpr uint32_t stream_group_chunks = bounce_slots / 2;  // chunks of one request started before the stream
                                                     // waits for the first (the rest of the slots serve others)
constexpr uint64_t bounce_bytes_min = 1u << 20;
constexpr uint32_t stream_kernel_copy_max = 64u << 10;  // stream_copy=kernel: larger chunks use the copy engine
// Device API, device_read=auto (the one-block latency path, docs/decisions/0003): a block-wide prefetch of at most
// landing_slot_bytes, made while its DeviceQueue has nothing else pending, is read into one of the queue's landing
// slots (pinned host-mapped memory) and the requesting block copies it to dst itself: no staging->GPU copy, no copy
// event for the worker to poll. A slot is claimed with one atomicCAS in device memory; a request that finds its slot
// (its thread block's linear index % landing_slots) busy takes the engine's copy instead, so no block ever waits for
// another's slot.
constexpr uint32_t landing_slot_bytes = 16u << 10;
constexpr uint32_t landing_slots = 8;                // per device-API queue
static_assert((queue_ring_slots & (queue_ring_slots - 1)) == 0);
static_assert(landing_slots <= queue_ring_slots && landing_slot_bytes % 16 == 0);
}  // namespace gpu_limits

enum GpuOp : uint32_t { gpu_read = 0, gpu_write = 1 };
// GpuRequest::mem_kind: MemKind (host 0, device 1), or a read into host-mapped memory that the requesting block
// copies to its destination itself (DeviceQueue landed reads: host memory for the engine, counted apart).
constexpr uint32_t gpu_mem_landed = 2;

// One request from the GPU, written by a leader thread into host-mapped memory. `ready` is the doorbell:
// it equals the request's sequence number once every other field is visible (system-scope fence first).
struct alignas(64) GpuRequest {
  uint64_t blocks;    // device address of n int64 block ids (used when n > request_inline_ids_max)
  uint64_t mem;       // destination of a read / source of a write (device memory, or host when mem_kind=0)
  uint32_t n;
  uint32_t op;        // GpuOp
  uint32_t mem_kind;  // MemKind, or gpu_mem_landed
  uint32_t ready;
  uint64_t cell;      // stream path: device address of a host-mapped flag, 0 at publish, 1 once done; or 0
  uint64_t pad;
  int64_t ids[gpu_limits::request_inline_ids_max];
};

// Shared state of one queue, in host-mapped pinned memory. Sequence numbers start at 1 and compare with
// wrap-around (int32 difference). Request seq lives in ring[seq % queue_ring_slots].
struct GpuQueueShared {
  GpuRequest ring[gpu_limits::queue_ring_slots];
  // done and failures share one aligned 8-byte word: the GPU reads both with one PCIe read (device.cuh), and
  // the control plane counts a failure before it moves done, so a snapshot with done >= seq holds seq's failure.
  alignas(64) uint32_t done;  // CPU->GPU: every request with seq <= done has finished (or failed)
  uint32_t failures;          // requests that failed so far
  uint32_t failed_seq;        // the last failed request
  int32_t failed_errno;
};

// Non-owning handle of a queue, passed by value to kernels (device.cuh uses it).
struct QueueRef {
  GpuQueueShared* shared = nullptr;  // device address of the host-mapped state
  uint32_t* tail = nullptr;          // device memory: last sequence number handed out
  uint32_t index = 0;
  // device_read=auto (gpu_limits::landing_*): landing_slots slots of landing_slot_bytes, pinned host-mapped
  // (device address), and their busy words in device memory (0 free, 1 claimed). nullptr: every read takes
  // the engine's staging->GPU copy.
  uint8_t* landing = nullptr;
  uint32_t* landing_busy = nullptr;
  uint32_t block_bytes = 0;  // the engine's block size (a read of n blocks is n * block_bytes)
  // device memory: a done value some waiter saw (<= the real one: done only grows), so a publish that finds its
  // ring slot free by it needs no PCIe read before writing the slot. nullptr: every publish reads done first.
  uint32_t* done_cache = nullptr;
};

struct GpuOptions {
  uint32_t queues = 8;               // device-API queues (one per thread block avoids serialising)
  std::string copy = "auto";         // staging->GPU copies: auto (measured at start) | batch | kernel | percopy
  // stream-ordered wait: kernel (1-thread poll kernel) | wait_value (cuStreamWaitValue32 on the request's
  // host-mapped flag: no SM; only where the start-up self-test saw it release). No host-function wait: CUDA
  // forbids a host function waiting on work not ordered before it, and it deadlocked on the H200.
  std::string stream_wait = "kernel";
  int device = -1;                   // CUDA device; -1: the current one
  uint32_t poll_spin_us = 200;       // control plane spins this long after the last request, then naps
  uint64_t bounce_bytes = 64ull << 20;  // stream path: pinned bounce pool (reads land here, then one copy
                                        // per chunk on the caller's stream); >= bounce_bytes_min
  uint32_t bounce_wait_ms = 60000;   // a submit waits at most this long for bounce space, then ETIMEDOUT
  // stream path, bounce -> GPU memory for reads: engine (cudaMemcpyAsync on the caller's stream: copy engine,
  // 0 SMs) | kernel (opt-in, the latency path of docs/decisions/0003: chunks of at most
  // gpu_limits::stream_kernel_copy_max bytes are copied by one warp reading the host-mapped bounce slot; in
  // stream_wait=kernel that warp is the wait kernel itself, so a one-block read enqueues one kernel instead of a wait
  // kernel and a copy)
  std::string stream_copy = "engine";
  // Device-API reads (DeviceQueue::prefetch): auto (a read of at most gpu_limits::landing_slot_bytes with nothing
  // else pending on its DeviceQueue lands in a host-mapped slot and the requesting block copies it itself: the
  // one-block latency path) | batch (always the engine's staging->GPU copy; the throughput path, which larger
  // reads take in auto too). stats() counts which path each read took.
  std::string device_read = "auto";
};
// Every knob of the table (gpuio/knobs.hpp: gpu_knobs()) in range or among its choices; std::invalid_argument
// naming the first that is not. Needs no CUDA: GpuRuntime calls it first, Python's gpuio.defaults before that.
void validate(const GpuOptions& o);

struct GpuStats {
  std::string copy_mode;        // staging->GPU copy method that runs
  std::string copy_choice;      // how it was chosen, with the measured times
  std::string stream_wait;      // kernel | wait_value
  std::string stream_copy;      // engine | kernel (GpuOptions::stream_copy)
  std::string device_name;
  uint64_t gpu_requests = 0;    // requests taken from GPU rings (device API + stream path)
  uint64_t gpu_failures = 0;
  std::string device_read;      // GpuOptions::device_read
  uint64_t landed_requests = 0; // device-API reads that landed in host-mapped memory (block copies them)
  uint64_t device_requests = 0; // device-API requests with a GPU-memory destination/source (engine copies)
  std::string device_read_mode; // what ran: "landed", "batch", "landed+batch" or "none"
  // Control plane, device-API requests (seconds summed over them; device_api_requests of them): submit (ring
  // slot seen -> engine.submit returned), engine (-> batch done seen), signal (-> done word published).
  uint64_t device_api_requests = 0;
  double device_api_submit_seconds = 0, device_api_engine_seconds = 0, device_api_signal_seconds = 0;
  uint64_t copies = 0;          // staging->GPU copy runs issued
  uint64_t copy_groups = 0;     // flushes (one batched call / kernel / group of copies each)
  uint64_t stage_in_copies = 0; // GPU->staging copies for writes
  uint64_t stream_requests = 0; // stream-ordered calls
  uint64_t stream_chunks = 0;   // bounce-sized pieces they were cut into
  uint64_t stream_host_submits = 0;  // chunks with host ids, handed to the engine at submit (no GPU publish)
  uint64_t bounce_bytes = 0;
  uint64_t bounce_waits = 0;    // submits that waited for bounce space to come free
  // Where a stream-ordered call's host time goes (seconds summed over calls; the latency breakdown): check
  // (capture query, id range check, bounce reserve), engine (ids into the slot + engine.submit, or the publish
  // launch: the request is under way at its end), wait (cuStreamWaitValue32 or the wait kernel enqueued),
  // copy (the bounce->GPU cudaMemcpyAsync enqueued), release (the slot's event recorded); call: the whole call.
  double stream_call_seconds = 0, stream_check_seconds = 0, stream_engine_seconds = 0, stream_wait_seconds = 0;
  double stream_copy_seconds = 0, stream_release_seconds = 0;
  double poller_cpu_seconds = 0;
  std::string last_error;       // message of the last failed GPU request
};

// Completion of one stream-ordered call: a CUDA event taken from its runtime's pool and recorded on the caller's
// stream after the call's last operation (so it completes once the stream has passed the call), back in the pool
// when this object is destroyed; the pool outlives the runtime while any StreamDone lives. It replaces a per-call
// torch.cuda.Event (created, recorded and destroyed per call from Python: microseconds on a one-block read).
class StreamDone {
 public:
  struct Pool;  // runtime_impl.hpp
  StreamDone(std::shared_ptr<Pool> pool, void* event, uint32_t before);
  ~StreamDone();
  StreamDone(const StreamDone&) = delete;
  StreamDone& operator=(const StreamDone&) = delete;

  uint32_t before() const { return before_; }  // the runtime's failures() before the call
  bool query() const;  // the stream has passed the call; std::runtime_error on a CUDA error
  // Polls until the stream has passed the call (2 ms of polls yielding the CPU between them, then naps growing
  // to 1 ms), at most timeout_s; false on timeout. Never blocks in the driver, so no wait can hang the caller.
  bool wait(double timeout_s) const;
  // `stream` (a cudaStream_t of any device) waits for the call: work enqueued there afterwards runs after it.
  void order(void* stream) const;

 private:
  std::shared_ptr<Pool> pool_;
  void* event_;  // cudaEvent_t
  uint32_t before_;
};

class GpuRuntime {
 public:
  // Attaches to engine (which must outlive the runtime): registers its staging pool with CUDA, installs the
  // DeviceMover, allocates queues and starts the control-plane thread. Throws std::runtime_error when no
  // CUDA device is usable (message says why) and std::invalid_argument for bad options (named).
  GpuRuntime(Engine& engine, const GpuOptions& opts);
  ~GpuRuntime();
  GpuRuntime(const GpuRuntime&) = delete;
  GpuRuntime& operator=(const GpuRuntime&) = delete;

  uint32_t queue_count() const;
  QueueRef queue(uint32_t i) const;  // throws std::out_of_range naming i

  // Stream-ordered request on `stream` (a cudaStream_t) for n int64 block ids: ids_on_device says whether
  // ids is GPU memory (read when the stream reaches the call: GPU-side sampling) or host memory (read now).
  // mem (device or host) is the destination/source, ordered after the stream's earlier work; the stream
  // waits for completion spending no SM (wait_value) or one polling thread (kernel). Reads with host ids
  // start at once (outside CUDA-graph capture). Cut into bounce-sized chunks; may wait (bounded, GIL-free
  // in the bindings) for bounce space. Returns the number of failures seen before the call, to compare
  // with failures() after the stream passed it.
  // done (optional): receives the call's completion event, recorded on `stream` after the call.
  uint32_t stream_submit(void* stream, GpuOp op, const int64_t* ids, bool ids_on_device, uint32_t n, void* mem,
                         MemKind kind, std::unique_ptr<StreamDone>* done = nullptr);
  uint32_t failures() const;
  std::string last_error() const;

  void* alloc(size_t bytes);  // device memory (cudaMalloc: 256-byte aligned)
  void free(void* p);
  GpuStats stats() const;
  // Control-plane hops of the last device-API requests (at most device_api_trace_max, oldest first), in ns:
  // {submit, engine, signal} as in GpuStats::device_api_*; taking them empties the record. For latency
  // breakdowns (medians, where the summed stats give means that a few slow reads dominate).
  static constexpr size_t device_api_trace_max = 4096;
  std::vector<std::array<uint32_t, 3>> take_device_api_trace();
  // Stops taking GPU requests (in-flight ones finish and are signalled), closes the engine, releases CUDA
  // resources. Idempotent. A kernel that publishes after close() waits forever: close after kernels end.
  void close();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// CAM's host API: an engine with its GPU runtime.
class GpuEngine {
 public:
  static std::unique_ptr<GpuEngine> create(const EngineOptions& opts, const GpuOptions& gpu = {});
  ~GpuEngine();
  void* alloc(size_t bytes) { return runtime_->alloc(bytes); }
  void free(void* p) { runtime_->free(p); }
  QueueRef queue(uint32_t i) const { return runtime_->queue(i); }
  Engine& engine() { return *engine_; }
  GpuRuntime& runtime() { return *runtime_; }

 private:
  GpuEngine() = default;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<GpuRuntime> runtime_;
};

namespace gpu {
// CUDA devices usable by this process, or an explanation: "no CUDA device: <cuda error>".
struct DeviceReport {
  int count = 0;
  std::string name;          // device 0
  std::string error;         // why none is usable
  int driver_version = 0;
  int runtime_version = 0;
  int sm_count = 0;
};
DeviceReport probe_devices();
// The device address of pinned host memory (cudaHostAlloc or cudaHostRegister'ed, mapped: with unified addressing
// every pinned allocation is), for kernels that read it in place over PCIe. std::invalid_argument when host is not
// pinned memory CUDA knows.
void* host_device_pointer(void* host);
// Bounded self-test: does cuStreamWaitValue32 on a host-mapped word release when the CPU writes it?
// Returns "works", "never released" or "error: ...". May leave a stuck stream behind: run it in a
// separate process (gpuio.gpu does).
std::string stream_wait_selftest(int timeout_ms);
// Baseline (CAM's CPU-managed comparison): one pread (O_DIRECT) + one cudaMemcpy per block, `threads`
// threads. Returns seconds.
double pread_memcpy_baseline(const std::string& path, const int64_t* ids, size_t n, uint32_t block_bytes,
                             void* dst_device, uint32_t threads);
// Latency probe: a kernel issues `iters` one-block reads through queue q (prefetch + prefetch_synchronize),
// each of ids[i], into dst; fills ns[i] with each round trip as the GPU's global timer saw it.
// publish_ns (optional): each read's publish alone (GPU clock), the rest of ns[i] is the control plane + data.
// landed: each read lands in host-mapped memory the probe owns and the probing block copies it to dst itself
// (DeviceQueue::prefetch_landed); otherwise DeviceQueue::prefetch, whose path GpuOptions::device_read decides.
// wait_ns (optional): publish end -> the leader seeing the read done (the rest after it is the block's copy).
void latency_probe(QueueRef q, const int64_t* ids_host, uint32_t iters, void* dst_device, std::vector<int64_t>& ns,
                   std::vector<int64_t>* publish_ns = nullptr, bool landed = false,
                   std::vector<int64_t>* wait_ns = nullptr);
}  // namespace gpu

}  // namespace gpuio
