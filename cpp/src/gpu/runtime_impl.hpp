// GpuRuntime internals shared by the GPU layer's files.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/fork.hpp"
#include "gpu/bounce.hpp"
#include "gpu/mover.hpp"
#include "gpuio/gpu.hpp"

namespace gpuio {

// StreamDone's event pool: events (timing off) of one device, reused; shared by the runtime and every live
// StreamDone, so a handle outliving its runtime still returns its event safely.
struct StreamDone::Pool {
  explicit Pool(int dev) : device(dev) {}
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  cudaEvent_t take();  // a pooled event, or a new one created on `device` (the caller's device is kept)
  void give(cudaEvent_t e);
  void fill(size_t n);  // creates n events up front (start(), with `device` current)

  const int device;
  std::mutex mu;
  std::vector<cudaEvent_t> free;  // guarded by mu
};

struct GpuRuntime::Impl {
  // The process that made the runtime. In a forked child its control-plane thread does not exist and its CUDA
  // context cannot be used: close() there leaves everything as it is (nothing joined, freed or synchronised).
  const uint32_t owner_fork = detail::fork_generation();
  Engine& engine;
  GpuOptions opts;
  int device = 0;
  std::string device_name;
  FixedBuffer staging{};
  bool staging_registered = false;
  std::unique_ptr<detail::CudaMover> mover;
  std::string copy_choice;

  // Queues: host-mapped shared state (host and device views) and device-memory tail counters. The last
  // queue (index opts.queues) serves the stream-ordered path.
  GpuQueueShared* shared_host = nullptr;
  GpuQueueShared* shared_dev = nullptr;
  uint32_t* tails = nullptr;
  uint32_t* done_cache = nullptr;  // device memory, one word per queue (QueueRef::done_cache)
  // device_read=auto: per device-API queue, gpu_limits::landing_slots slots of landing_slot_bytes (pinned,
  // host-mapped) and their busy words (device memory; claimed and released by the GPU alone)
  uint8_t* landing_host = nullptr;
  uint8_t* landing_dev = nullptr;
  uint32_t* landing_busy = nullptr;
  uint32_t* cells_host = nullptr;  // stream path: per-call words receiving the request's seq
  uint32_t* cells_dev = nullptr;
  std::atomic<uint32_t> next_cell{0};
  void* wait_value_fn = nullptr;  // cuStreamWaitValue32 (wait_value mode)
  int64_t* ids_pinned = nullptr;   // control plane: ids copied from GPU requests
  cudaStream_t control_stream = nullptr;
  detail::BouncePool bounce;       // stream path (gpu.hpp: no GPU wait may need a host CUDA call)
  std::shared_ptr<StreamDone::Pool> done_pool;  // stream path: the calls' completion events

  // Control plane.
  struct InFlight {
    uint32_t seq;
    int64_t seen_ns = 0, submitted_ns = 0;  // device-API requests: ring slot seen, engine.submit returned
    uint32_t* cell = nullptr;  // host view of the request's completion flag (stream path)
    BatchHandle handle;
    bool failed_at_submit = false;
    int err = 0;
    std::string message;
  };
  struct QueueState {
    uint32_t next = 1;  // next sequence number expected in the ring
    std::deque<InFlight> inflight;
  };
  std::vector<QueueState> qstate;
  // Stream chunks with host ids handed to the engine by the submitting thread: the poller sets their cells.
  std::mutex host_mu;
  std::vector<InFlight> host_inbox;   // guarded by host_mu
  std::vector<InFlight> host_inflight;  // poller only
  std::atomic<uint64_t> stream_requests{0}, stream_chunks{0}, stream_host_submits{0}, bounce_waits{0};
  // GpuStats::stream_*_seconds, in ns
  std::atomic<uint64_t> stream_call_ns{0}, stream_check_ns{0}, stream_engine_ns{0}, stream_wait_ns{0};
  std::atomic<uint64_t> stream_copy_ns{0}, stream_release_ns{0};
  std::thread poller;
  std::atomic<bool> stop{false};
  std::atomic<double> poller_cpu{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> landed_requests{0}, device_requests{0};  // device-API requests by mem_kind
  // Control-plane hops of device-API requests (GpuStats::device_api_*), written by the poller alone.
  std::atomic<uint64_t> api_requests{0}, api_submit_ns{0}, api_engine_ns{0}, api_signal_ns{0};
  std::mutex trace_mu;
  std::vector<std::array<uint32_t, 3>> trace;  // guarded by trace_mu; the last device_api_trace_max hops
  size_t trace_next = 0;                       // guarded by trace_mu: where the next record goes once full
  std::atomic<uint32_t> failures{0};
  mutable std::mutex error_mu;
  std::string last_error;
  bool closed = false;

  Impl(Engine& e, const GpuOptions& o) : engine(e), opts(o) {}
  uint32_t total_queues() const { return opts.queues + 1; }
  QueueRef ref(uint32_t i) const {
    QueueRef r{shared_dev + i, tails + i, i};
    r.block_bytes = engine.options().block_size;
    r.done_cache = done_cache + i;
    if (landing_dev && i < opts.queues) {  // not the stream path's queue
      r.landing = landing_dev + size_t{i} * gpu_limits::landing_slots * gpu_limits::landing_slot_bytes;
      r.landing_busy = landing_busy + size_t{i} * gpu_limits::landing_slots;
    }
    return r;
  }
  void record_hops(const InFlight& f, int64_t done_seen_ns, int64_t published_ns);

  void start();
  void run_poller();
  bool take_requests(uint32_t q);  // true if it took any
  bool finish_requests(uint32_t q);
  bool finish_host();  // host-submitted stream chunks
  // One chunk of a stream request (stream_submit.cpp): start puts it under way (engine or publish kernel),
  // finish enqueues the stream's wait for it and the copy back, then the slot's release.
  struct Chunk {
    detail::BounceRegion r;
    uint32_t* cell_dev = nullptr;
    void* mem = nullptr;
    size_t bytes = 0;
    bool copy_back = false;  // read into GPU memory: bounce -> mem after the wait
    bool warp_copy = false;  // ... by one warp (stream_copy=kernel, a small chunk), not the copy engine
  };
  Chunk stream_start(cudaStream_t s, GpuOp op, const int64_t* ids, bool ids_on_device, uint32_t n, void* mem,
                     MemKind kind, const detail::BounceRegion& r, bool capturing);
  void stream_finish(cudaStream_t s, const Chunk& c);
  void fail(uint32_t q, InFlight& f);
  void shutdown();
};

namespace detail {
// Stream path kernels (stream_path.cu).
// Loads the stream-path kernels up front (lazy loading must not happen while a wait kernel spins).
cudaError_t preload_stream_kernels();
// ids: GPU-resident ids to copy into slot_ids_dev first, or nullptr when the host filled the slot already.
cudaError_t launch_publish(cudaStream_t s, QueueRef q, GpuOp op, const int64_t* ids, int64_t* slot_ids_dev,
                           uint32_t n, void* mem, MemKind kind, uint32_t* cell_dev);
// "kernel" wait mode: a one-thread kernel that returns once *cell_dev == 1.
cudaError_t launch_wait_cell(cudaStream_t s, const uint32_t* cell_dev);
// stream_copy=kernel: one warp copies bytes from src (host-mapped bounce data) to dst, first waiting for
// *cell_dev == 1 when cell_dev is not null (the fused wait of stream_wait=kernel).
cudaError_t launch_wait_copy(cudaStream_t s, const uint32_t* cell_dev, const void* src, void* dst, size_t bytes);
}  // namespace detail

}  // namespace gpuio
