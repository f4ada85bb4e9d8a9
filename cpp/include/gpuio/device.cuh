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

// done and failures in one PCIe read (gpu.hpp: they share an aligned 8-byte word; the control plane counts a
// failure before it moves done). Low half: done, high half: failures.
struct DoneWord {
  uint32_t done, failures;
};
__device__ __forceinline__ DoneWord load_done_word(const GpuQueueShared* s) {
  static_assert(offsetof(GpuQueueShared, failures) == offsetof(GpuQueueShared, done) + 4, "done|failures word");
  static_assert(offsetof(GpuQueueShared, done) % 8 == 0, "done|failures word alignment");
  unsigned long long w =
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(
          *reinterpret_cast<unsigned long long*>(const_cast<uint32_t*>(&s->done)))
          .load(cuda::memory_order_acquire);
  return {static_cast<uint32_t>(w), static_cast<uint32_t>(w >> 32)};
}

// The same word without acquire ordering: later accesses need not wait for it (a snapshot whose read overlaps the
// request's writes; the system fence before the doorbell still orders it first).
__device__ __forceinline__ DoneWord load_done_word_relaxed(const GpuQueueShared* s) {
  unsigned long long w =
      cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(
          *reinterpret_cast<unsigned long long*>(const_cast<uint32_t*>(&s->done)))
          .load(cuda::memory_order_relaxed);
  return {static_cast<uint32_t>(w), static_cast<uint32_t>(w >> 32)};
}

// Remembers a done value seen (QueueRef::done_cache); racing writers may store an older one, which stays <= done.
__device__ __forceinline__ void note_done(QueueRef q, uint32_t done) {
  if (q.done_cache) cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(*q.done_cache).store(done, cuda::memory_order_relaxed);
}

// Publishes one request from a single thread; returns its sequence number. cell: see GpuRequest.
// failures (optional): the queue's failure count read before the doorbell (what a later wait compares with).
__device__ __forceinline__ uint32_t publish_seq(QueueRef q, uint32_t seq, uint32_t op, const int64_t* ids, uint32_t n,
                                                void* mem, uint32_t mem_kind, uint32_t* cell, uint32_t* failures) {
  GpuQueueShared* s = q.shared;
  // The slot is free once the request that used it one lap ago is done. Known free by the cached done (device
  // memory): the failure-count snapshot's PCIe read then overlaps the request's writes instead of preceding them.
  const uint32_t lap = seq - gpu_limits::queue_ring_slots;
  DoneWord w;
  if (q.done_cache &&
      seq_reached(cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(*q.done_cache).load(cuda::memory_order_relaxed),
                  lap)) {
    w = load_done_word_relaxed(s);
  } else {
    uint32_t ns = 64;
    w = load_done_word(s);
    while (!seq_reached(w.done, lap)) {
      __nanosleep(ns);
      if (ns < 2048) ns *= 2;
      w = load_done_word(s);
    }
    note_done(q, w.done);
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
  // One system-scope fence orders every field (and the block's ids/data, seen through __syncthreads) before the
  // doorbell; the doorbell store itself then needs no second fence (a release store would add one).
  __threadfence_system();
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(r->ready).store(seq, cuda::memory_order_relaxed);
  if (failures) *failures = w.failures;
  return seq;
}

__device__ __forceinline__ uint32_t publish(QueueRef q, uint32_t op, const int64_t* ids, uint32_t n, void* mem,
                                            uint32_t mem_kind, uint32_t* cell, uint32_t* failures = nullptr) {
  return publish_seq(q, atomicAdd(q.tail, 1u) + 1u, op, ids, n, mem, mem_kind, cell, failures);
}

// Waits (one thread) until seq is done; returns 0 or the errno of a failure after `failures_before`. Each poll
// is one PCIe read of done and failures together; the sleep between polls stays short (a read round trip is
// ~1 us already, and this wait is the one-block read's latency).
__device__ __forceinline__ int wait_done(QueueRef q, uint32_t seq, uint32_t failures_before) {
  GpuQueueShared* s = q.shared;
  uint32_t ns = 32;
  DoneWord w = load_done_word(s);
  while (!seq_reached(w.done, seq)) {
    __nanosleep(ns);
    if (ns < 256) ns *= 2;
    w = load_done_word(s);
  }
  note_done(q, w.done);
  if (w.failures != failures_before) {
    return *reinterpret_cast<volatile int32_t*>(&s->failed_errno);
  }
  return 0;
}

// bytes from src (host-mapped, just written by the CPU) to dst (GPU memory) by the calling thread block: every
// thread first issues all of its loads of a round (up to 8 x 16 bytes), then stores them, so a round costs one
// PCIe read latency rather than one per load (a load-store loop serialises them: the compiler cannot tell that
// dst and src do not alias). __ldcv: fetched again, never from a cache line of the area's previous use.
__device__ __forceinline__ void block_copy_from_host(void* dst, const void* src, uint32_t bytes) {
  const uint32_t t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const uint32_t step = blockDim.x * blockDim.y * blockDim.z;
  if (((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) | bytes) & 15) == 0) {
    constexpr uint32_t per_round = 8;
    const uint4* s = static_cast<const uint4*>(src);
    uint4* d = static_cast<uint4*>(dst);
    const uint32_t words = bytes / 16;
    for (uint32_t base = 0; base < words; base += step * per_round) {
      uint4 v[per_round];
#pragma unroll
      for (uint32_t k = 0; k < per_round; ++k) {
        const uint32_t i = base + k * step + t;
        if (i < words) v[k] = __ldcv(s + i);
      }
#pragma unroll
      for (uint32_t k = 0; k < per_round; ++k) {
        const uint32_t i = base + k * step + t;
        if (i < words) d[i] = v[k];
      }
    }
  } else {
    const volatile uint8_t* s = static_cast<const volatile uint8_t*>(src);
    uint8_t* d = static_cast<uint8_t*>(dst);
    for (uint32_t i = t; i < bytes; i += step) d[i] = s[i];
  }
}

}  // namespace detail

class DeviceQueue {
 public:
  __device__ explicit DeviceQueue(QueueRef q) : q_(q) {}

  // Read n blocks into dst (n * block_size bytes of GPU memory). Returns at once. With the runtime's
  // device_read=auto, a read of at most gpu_limits::landing_slot_bytes made while this object has nothing else
  // pending lands in one of the queue's host-mapped landing slots and prefetch_synchronize's threads copy it to
  // dst (the latency path: no engine copy); larger or overlapping reads, or one whose slot is taken, go the
  // engine's staging->GPU copy (the throughput path).
  __device__ void prefetch(const int64_t* blocks, uint32_t n, void* dst) {
    __syncthreads();  // the block's writes of ids come first
    if (leader()) {
      const uint32_t bytes = n * q_.block_bytes;
      int32_t slot = -1;
      // The slot follows the thread block, not the sequence number: a block reading one block at a time finds
      // its own slot free again, and the claim does not wait for the tail's atomic (both are in flight at once).
      const uint32_t i =
          (blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)) % gpu_limits::landing_slots;
      const bool small = q_.landing && pending_ == 0 && land_bytes_ == 0 && n > 0 &&
                         bytes <= gpu_limits::landing_slot_bytes && bytes / n == q_.block_bytes;
      uint32_t seq = atomicAdd(q_.tail, 1u) + 1u;
      if (small && atomicCAS(q_.landing_busy + i, 0u, 1u) == 0u) slot = static_cast<int32_t>(i);
      if (slot >= 0) {
        uint8_t* landing = q_.landing + static_cast<size_t>(slot) * gpu_limits::landing_slot_bytes;
        publish_at(seq, gpu_read, blocks, n, landing, gpu_mem_landed);
        land_dst_ = dst;
        land_src_ = landing;
        land_bytes_ = bytes;
        land_slot_ = slot;
      } else {
        publish_at(seq, gpu_read, blocks, n, dst, /*device*/ 1);
      }
    }
  }
  __device__ int prefetch_synchronize() { return synchronize(); }
  // Write n blocks from src. Returns at once; src stays untouched until write_back_synchronize.
  __device__ void write_back(const int64_t* blocks, uint32_t n, const void* src) {
    submit(gpu_write, blocks, n, const_cast<void*>(src));
  }
  __device__ int write_back_synchronize() { return synchronize(); }

  // The landed read with a landing area the caller owns (what device_read=auto does with the queue's slots):
  // the engine reads the blocks into `landing`, pinned host-mapped memory of `bytes` (= n * block_size) that
  // this thread block owns (cudaHostAlloc with cudaHostAllocMapped: the same address on host and device under
  // UVA), and prefetch_synchronize's threads copy landing -> dst. One landed request at a time per
  // DeviceQueue; the landing area is free again once prefetch_synchronize returned.
  __device__ void prefetch_landed(const int64_t* blocks, uint32_t n, void* dst, void* landing, uint32_t bytes) {
    __syncthreads();
    if (leader()) {
      publish_at(atomicAdd(q_.tail, 1u) + 1u, gpu_read, blocks, n, landing, gpu_mem_landed);
      land_dst_ = dst;
      land_src_ = landing;
      land_bytes_ = bytes;
      land_slot_ = -1;
    }
  }

  // Single-thread variants, for code that already elected a leader (no __syncthreads inside; always the
  // engine's copy).
  __device__ void submit_one_thread(uint32_t op, const int64_t* blocks, uint32_t n, void* mem) {
    publish_at(atomicAdd(q_.tail, 1u) + 1u, op, blocks, n, mem, /*device*/ 1);
  }
  __device__ int synchronize_one_thread() {
    if (pending_ == 0) return 0;
    pending_ = 0;
    int err = detail::wait_done(q_, last_, failures_before_);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(done_seen_ns_));
    return err;
  }
  // Leader thread: GPU global timer (ns) when the last *_synchronize saw its requests done, before a landed
  // read's copy (latency breakdowns: wait vs copy).
  __device__ uint64_t done_seen_ns() const { return done_seen_ns_; }

 private:
  __device__ bool leader() const { return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0; }

  __device__ void publish_at(uint32_t seq, uint32_t op, const int64_t* blocks, uint32_t n, void* mem, uint32_t kind) {
    uint32_t failures = 0;
    last_ = detail::publish_seq(q_, seq, op, blocks, n, mem, kind, nullptr, &failures);
    if (pending_ == 0) failures_before_ = failures;
    ++pending_;
  }

  __device__ void submit(uint32_t op, const int64_t* blocks, uint32_t n, void* mem) {
    __syncthreads();  // the block's writes of ids (and of mem, for write_back) come first
    if (leader()) submit_one_thread(op, blocks, n, mem);
  }

  __device__ int synchronize() {
    // The landed read's fields live in the leader's copy of this object: shared memory hands them to the block.
    __shared__ int err;
    __shared__ const void* src;
    __shared__ void* dst;
    __shared__ uint32_t bytes;
    __syncthreads();  // every thread has read the previous call's err/bytes before the leader rewrites them
    if (leader()) {
      err = synchronize_one_thread();
      src = land_src_;
      dst = land_dst_;
      bytes = land_bytes_;
    }
    __syncthreads();  // leader's acquire + barrier: every thread sees the data
    if (bytes != 0) {
      if (err == 0) detail::block_copy_from_host(dst, src, bytes);
      __syncthreads();  // dst complete for every thread; the landing area may be reused
      if (leader()) {
        if (land_slot_ >= 0) {
          // Every thread's copy loads completed before the barrier (their values are stored); a release store
          // hands the slot back without waiting for it (off the read's critical path).
          cuda::atomic_ref<uint32_t, cuda::thread_scope_device>(q_.landing_busy[land_slot_])
              .store(0u, cuda::memory_order_release);
        }
        land_bytes_ = 0;
        land_slot_ = -1;
      }
    }
    return err;
  }

  QueueRef q_;
  // The pending landed read (leader's copy only).
  void* land_dst_ = nullptr;
  const void* land_src_ = nullptr;
  uint32_t land_bytes_ = 0;
  int32_t land_slot_ = -1;  // queue landing slot, or -1 (none, or the caller's own landing area)
  uint32_t last_ = 0;
  uint32_t pending_ = 0;
  uint32_t failures_before_ = 0;
  uint64_t done_seen_ns_ = 0;
};

}  // namespace gpuio
