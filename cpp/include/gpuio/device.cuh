// gpuio device API (CAM Table II), usable from any kernel: GPU threads name the blocks they need, CPU
// workers run the SSD queues, the GPU keeps computing.
//
//   __global__ void k(gpuio::QueueRef qr, ...) {
//     gpuio::DeviceQueue q(qr);                 // every thread of the block
//     q.prefetch(ids, n, buf);                  // block-wide call: thread 0 publishes, returns at once
//     ...compute...
//     int err = q.prefetch_synchronize();       // block-wide: buf holds the data (err == 0) afterwards
//   }
//
// Contracts: each call is made by every thread of the thread block (it contains __syncthreads()); one
// thread (threadIdx 0,0,0) publishes the request into the queue's host-mapped ring and rings its doorbell.
// ids (n int64 logical block ids, in GPU memory) and the buffer stay untouched until the matching
// *_synchronize returns. *_synchronize waits for every request this DeviceQueue object published and
// returns 0 or the errno of a failed one. Several thread blocks may share a queue (sequence numbers come
// from an atomic), but a queue per block (QueueRef from GpuEngine::queue(blockIdx.x % count)) never
// serialises blocks. Spinning uses __nanosleep, so a waiting block costs its SM next to nothing.
#pragma once
#include <cuda/atomic>

#include "gpuio/gpu.hpp"

namespace gpuio {

namespace detail {

__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  return cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*const_cast<uint32_t*>(p))
      .load(cuda::memory_order_acquire);
}

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*p).store(v, cuda::memory_order_release);
}

__device__ __forceinline__ bool seq_reached(uint32_t done, uint32_t seq) {
  return static_cast<int32_t>(done - seq) >= 0;
}

// Publishes one request from a single thread; returns its sequence number. cell: see GpuRequest.
__device__ __forceinline__ uint32_t publish(QueueRef q, uint32_t op, const int64_t* ids, uint32_t n, void* mem,
                                            uint32_t mem_kind, uint32_t* cell) {
  uint32_t seq = atomicAdd(q.tail, 1u) + 1u;
  GpuQueueShared* s = q.shared;
  // The slot is free once the request that used it one lap ago is done.
  uint32_t ns = 64;
  while (!seq_reached(load_acquire_sys(&s->done), seq - gpu_limits::queue_ring_slots)) {
    __nanosleep(ns);
    if (ns < 2048) ns *= 2;
  }
  GpuRequest* r = &s->ring[seq % gpu_limits::queue_ring_slots];
  r->blocks = reinterpret_cast<uint64_t>(ids);
  r->mem = reinterpret_cast<uint64_t>(mem);
  r->n = n;
  r->op = op;
  r->mem_kind = mem_kind;
  r->cell = reinterpret_cast<uint64_t>(cell);
  if (n <= gpu_limits::request_inline_ids_max) {
    for (uint32_t i = 0; i < n; ++i) r->ids[i] = ids[i];
  }
  if (cell) *reinterpret_cast<volatile uint32_t*>(cell) = 0;  // the control plane sets 1 when done
  __threadfence_system();  // every field (and the block's ids/data) before the doorbell
  store_release_sys(&r->ready, seq);
  return seq;
}

// Waits (one thread) until seq is done; returns 0 or the errno of a failure at or after `since`.
__device__ __forceinline__ int wait_done(QueueRef q, uint32_t seq, uint32_t failures_before) {
  GpuQueueShared* s = q.shared;
  uint32_t ns = 32;
  while (!seq_reached(load_acquire_sys(&s->done), seq)) {
    __nanosleep(ns);
    if (ns < 1024) ns *= 2;
  }
  if (load_acquire_sys(&s->failures) != failures_before) {
    return *reinterpret_cast<volatile int32_t*>(&s->failed_errno);
  }
  return 0;
}

}  // namespace detail

class DeviceQueue {
 public:
  __device__ explicit DeviceQueue(QueueRef q) : q_(q) {}

  // Read n blocks into dst (n * block_size bytes of GPU memory). Returns at once.
  __device__ void prefetch(const int64_t* blocks, uint32_t n, void* dst) { submit(gpu_read, blocks, n, dst); }
  __device__ int prefetch_synchronize() { return synchronize(); }
  // Write n blocks from src. Returns at once; src stays untouched until write_back_synchronize.
  __device__ void write_back(const int64_t* blocks, uint32_t n, const void* src) {
    submit(gpu_write, blocks, n, const_cast<void*>(src));
  }
  __device__ int write_back_synchronize() { return synchronize(); }

  // Latency variant for small reads (issue 14; opt-in): the engine reads the blocks into `landing`, pinned
  // host-mapped memory of `bytes` (= n * block_size) that this thread block owns (cudaHostAlloc with
  // cudaHostAllocMapped: the same address on host and device under UVA), so the engine queues no
  // staging->GPU copy; prefetch_synchronize then waits and the block's own threads copy landing -> dst over
  // PCIe (a 4 KiB block is 256 16-byte loads: no copy-engine launch, event or worker poll on the round trip).
  // One landed request at a time per DeviceQueue; the landing area is free again once prefetch_synchronize
  // returned (this block reuses it in program order, so no release flag is needed).
  __device__ void prefetch_landed(const int64_t* blocks, uint32_t n, void* dst, void* landing, uint32_t bytes) {
    __syncthreads();
    if (leader()) {
      if (pending_ == 0) failures_before_ = detail::load_acquire_sys(&q_.shared->failures);
      last_ = detail::publish(q_, gpu_read, blocks, n, landing, /*host*/ 0, nullptr);
      ++pending_;
    }
    land_dst_ = dst;  // every thread: they all copy in synchronize()
    land_src_ = landing;
    land_bytes_ = bytes;
  }

  // Single-thread variants, for code that already elected a leader (no __syncthreads inside).
  __device__ void submit_one_thread(uint32_t op, const int64_t* blocks, uint32_t n, void* mem) {
    if (pending_ == 0) failures_before_ = detail::load_acquire_sys(&q_.shared->failures);
    last_ = detail::publish(q_, op, blocks, n, mem, /*device*/ 1, nullptr);
    ++pending_;
  }
  __device__ int synchronize_one_thread() {
    if (pending_ == 0) return 0;
    pending_ = 0;
    return detail::wait_done(q_, last_, failures_before_);
  }

 private:
  __device__ bool leader() const { return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0; }

  __device__ void submit(uint32_t op, const int64_t* blocks, uint32_t n, void* mem) {
    __syncthreads();  // the block's writes of ids (and of mem, for write_back) come first
    if (leader()) submit_one_thread(op, blocks, n, mem);
  }

  __device__ int synchronize() {
    __shared__ int err;
    if (leader()) err = synchronize_one_thread();
    __syncthreads();  // leader's acquire + barrier: every thread sees the data
    if (land_bytes_ != 0) {
      if (err == 0) copy_landed();
      land_bytes_ = 0;
      __syncthreads();  // dst complete for every thread; the landing area may be reused
    }
    return err;
  }

  // landing (host-mapped) -> dst by every thread of the block; 16-byte accesses when both are aligned.
  __device__ void copy_landed() {
    const uint32_t t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const uint32_t step = blockDim.x * blockDim.y * blockDim.z;
    if (((reinterpret_cast<uintptr_t>(land_src_) | reinterpret_cast<uintptr_t>(land_dst_) | land_bytes_) & 15) == 0) {
      const uint4* s = static_cast<const uint4*>(land_src_);
      uint4* d = static_cast<uint4*>(land_dst_);
      // __ldcv: fetched again, never from a cache line of this area's previous use (the CPU rewrote it)
      for (uint32_t i = t; i < land_bytes_ / 16; i += step) d[i] = __ldcv(s + i);
    } else {
      const volatile uint8_t* s = static_cast<const volatile uint8_t*>(land_src_);
      uint8_t* d = static_cast<uint8_t*>(land_dst_);
      for (uint32_t i = t; i < land_bytes_; i += step) d[i] = s[i];
    }
  }

  QueueRef q_;
  void* land_dst_ = nullptr;
  const void* land_src_ = nullptr;
  uint32_t land_bytes_ = 0;
  uint32_t last_ = 0;
  uint32_t pending_ = 0;
  uint32_t failures_before_ = 0;
};

}  // namespace gpuio
