// Stream-ordered requests, host side (gpu.hpp states the rule this follows: no GPU-side wait may need a
// CUDA call that a host thread has yet to make). Chunks of at most one bounce slot, started in groups of up to
// gpu_limits::stream_group_chunks before the stream's waits for them are enqueued. Per chunk:
//   read, host ids (not capturing): ids into the slot, engine.submit(read -> slot data, host memory) now;
//        the poller sets the chunk's cell when the batch is done;
//   otherwise (GPU ids, writes, graph capture): [write: copy mem -> slot data on the stream]; publish kernel
//        (GPU ids copied into the slot's host-mapped ids); the poller submits it to the engine;
//   then on the stream: wait for the cell (kernel or cuStreamWaitValue32) and [read into GPU memory: copy
//   slot data -> mem]; the slot is released after that (an event on the stream).
// With stream_copy=kernel a read chunk of <= 64 KiB into GPU memory is copied by one warp from the host-mapped
// slot instead (fused with the wait in stream_wait=kernel). The call ends by recording its completion event
// (StreamDone, pooled) on the stream.
// Every CUDA call here is made by the submitting thread before any wait it enqueues; the engine and the
// poller make none for these requests, so a context-synchronising call anywhere can always finish.
#include <cuda.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "gpu/cuda_check.hpp"
#include "gpu/runtime_impl.hpp"
#include "gpuio/status.hpp"

namespace gpuio {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
void add_ns(std::atomic<uint64_t>& c, int64_t from, int64_t to) {
  c.fetch_add(static_cast<uint64_t>(to - from), std::memory_order_relaxed);
}
}  // namespace

GpuRuntime::Impl::Chunk GpuRuntime::Impl::stream_start(cudaStream_t s, GpuOp op, const int64_t* ids,
                                                       bool ids_on_device, uint32_t n, void* mem, MemKind kind,
                                                       const detail::BounceRegion& r, bool capturing) {
  const uint32_t bs = engine.options().block_size;
  const size_t bytes = size_t{n} * bs;
  const int64_t t0 = now_ns();
  void* io_mem = kind == MemKind::device ? static_cast<void*>(r.data) : mem;  // host memory needs no bounce
  const uint32_t idx = next_cell.fetch_add(1, std::memory_order_relaxed) % gpu_limits::stream_cells_max;
  uint32_t* cell_host = cells_host + idx;
  Chunk c;
  c.r = r;
  c.cell_dev = cells_dev + idx;
  c.mem = mem;
  c.bytes = bytes;
  c.copy_back = op == gpu_read && kind == MemKind::device;
  c.warp_copy = c.copy_back && opts.stream_copy == "kernel" && bytes <= gpu_limits::stream_kernel_copy_max;
  if (!ids_on_device) std::memcpy(r.ids, ids, sizeof(int64_t) * n);
  if (op == gpu_read && !ids_on_device && !capturing) {
    __atomic_store_n(cell_host, 0u, __ATOMIC_RELEASE);
    InFlight f;
    f.seq = 0;
    f.cell = cell_host;
    f.handle = engine.submit(IoOp::read, r.ids, n, io_mem, MemKind::host);  // starts now
    {
      std::lock_guard<std::mutex> g(host_mu);
      host_inbox.push_back(std::move(f));
    }
    stream_host_submits.fetch_add(1, std::memory_order_relaxed);
  } else {
    if (op == gpu_write && kind == MemKind::device) {
      GPUIO_CUDA(cudaMemcpyAsync(r.data, mem, bytes, cudaMemcpyDeviceToHost, s));
    }
    GPUIO_CUDA(detail::launch_publish(s, ref(opts.queues), op, ids_on_device ? ids : nullptr, r.ids_dev, n, io_mem,
                                      MemKind::host, c.cell_dev));
  }
  add_ns(stream_engine_ns, t0, now_ns());  // the request is under way (engine or ring)
  return c;
}

void GpuRuntime::Impl::stream_finish(cudaStream_t s, const Chunk& c) {
  const int64_t t1 = now_ns();
  // stream_copy=kernel, a small read into GPU memory: one warp copies the slot (the bounce data is host-mapped,
  // read at its device address r.data_dev); with the kernel wait that warp also waits (one launch).
  if (c.warp_copy && opts.stream_wait != "wait_value") {
    GPUIO_CUDA(detail::launch_wait_copy(s, c.cell_dev, c.r.data_dev, c.mem, c.bytes));
    add_ns(stream_wait_ns, t1, now_ns());  // wait and copy are one launch: counted as the wait
    stream_chunks.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (opts.stream_wait == "wait_value") {
    using WaitFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
    CUresult w = reinterpret_cast<WaitFn>(wait_value_fn)(reinterpret_cast<CUstream>(s),
                                                         reinterpret_cast<CUdeviceptr>(c.cell_dev), 1,
                                                         CU_STREAM_WAIT_VALUE_EQ);
    if (w != CUDA_SUCCESS) throw std::runtime_error("cuStreamWaitValue32 failed: CUresult " + std::to_string(int(w)));
  } else {
    GPUIO_CUDA(detail::launch_wait_cell(s, c.cell_dev));
  }
  const int64_t t2 = now_ns();
  add_ns(stream_wait_ns, t1, t2);
  if (c.warp_copy) {
    GPUIO_CUDA(detail::launch_wait_copy(s, nullptr, c.r.data_dev, c.mem, c.bytes));
  } else if (c.copy_back) {
    GPUIO_CUDA(cudaMemcpyAsync(c.mem, c.r.data, c.bytes, cudaMemcpyHostToDevice, s));
  }
  add_ns(stream_copy_ns, t2, now_ns());
  stream_chunks.fetch_add(1, std::memory_order_relaxed);
}

namespace {
// The call's completion event, recorded on s after everything the call enqueued there.
std::unique_ptr<StreamDone> record_done(const std::shared_ptr<StreamDone::Pool>& pool, cudaStream_t s,
                                        uint32_t before) {
  cudaEvent_t e = pool->take();
  cudaError_t err = cudaEventRecord(e, s);
  if (err != cudaSuccess) {
    pool->give(e);
    throw std::runtime_error("cudaEventRecord (the stream call's completion) failed: " + detail::cuda_error_text(err));
  }
  return std::make_unique<StreamDone>(pool, e, before);
}
}  // namespace

uint32_t GpuRuntime::stream_submit(void* stream, GpuOp op, const int64_t* ids, bool ids_on_device, uint32_t n,
                                   void* mem, MemKind kind, std::unique_ptr<StreamDone>* done) {
  Impl& m = *impl_;
  GPUIO_EXPECT(!m.closed, "GPU runtime is closed");
  GPUIO_EXPECT(n <= gpu_limits::request_blocks_max, "a stream-ordered request of " + std::to_string(n) +
                                                        " blocks exceeds request_blocks_max=" +
                                                        std::to_string(gpu_limits::request_blocks_max));
  const int64_t t_call = now_ns();
  const uint32_t before = m.failures.load(std::memory_order_acquire);
  m.stream_requests.fetch_add(1, std::memory_order_relaxed);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (n == 0) {
    if (done) *done = record_done(m.done_pool, s, before);
    return before;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  GPUIO_CUDA(cudaStreamIsCapturing(s, &capture));
  const bool capturing = capture == cudaStreamCaptureStatusActive;
  if (!ids_on_device) m.engine.check_blocks(ids, n);  // a bad id fails here, before any chunk is under way
  const uint32_t bs = m.engine.options().block_size;
  const uint32_t chunk = m.bounce.slot_blocks();
  // Chunks are started in groups before the stream waits for the first of them: a chunk whose publish kernel
  // sat behind the previous chunk's wait on the stream would start only when that one finished (one chunk in
  // flight per request, as GPU ids and writes had). The group takes only slots free now (beyond its first),
  // so it never waits on a slot that only its own unenqueued waits would free.
  Impl::Chunk group[gpu_limits::stream_group_chunks];
  uint32_t started = 0;
  auto finish_group = [&] {
    for (uint32_t i = 0; i < started; ++i) {
      try {
        m.stream_finish(s, group[i]);
      } catch (...) {
        for (uint32_t j = i; j < started; ++j) m.bounce.release_after(group[j].r, s);
        started = 0;
        throw;
      }
      const int64_t t_rel = now_ns();
      m.bounce.release_after(group[i].r, s);
      add_ns(m.stream_release_ns, t_rel, now_ns());
    }
    started = 0;
  };
  for (uint32_t off = 0; off < n; off += chunk) {
    const uint32_t k = std::min(chunk, n - off);
    detail::BounceRegion r;
    if (capturing) {
      r = m.bounce.dedicated(k);
    } else if (started == 0 || !m.bounce.try_reserve(&r)) {
      finish_group();
      bool waited = false;
      r = m.bounce.reserve(m.opts.bounce_wait_ms, &waited);
      if (waited) m.bounce_waits.fetch_add(1, std::memory_order_relaxed);
    }
    if (off == 0) add_ns(m.stream_check_ns, t_call, now_ns());  // capture query, id check, first reserve
    try {
      group[started] = m.stream_start(s, op, ids + off, ids_on_device, k, static_cast<uint8_t*>(mem) + size_t{off} * bs,
                                      kind, r, capturing);
      ++started;
    } catch (...) {
      // What was enqueued before the failing call keeps the slot until the stream passes it; the chunks
      // already under way still get their waits, so no slot is reused while the engine may write it.
      m.bounce.release_after(r, s);
      finish_group();
      throw;
    }
    if (started == gpu_limits::stream_group_chunks) finish_group();
  }
  finish_group();
  if (done) *done = record_done(m.done_pool, s, before);  // counted in the call, not in a part
  add_ns(m.stream_call_ns, t_call, now_ns());
  return before;
}

}  // namespace gpuio
