// Stream-ordered requests, device side. publish_kernel (one block) copies the chunk's block ids into the
// bounce slot's host-mapped ids (so the control plane reads them with no cudaMemcpy), then one thread
// publishes the request; the sequence number is taken on the GPU, so CUDA-graph replays publish fresh
// requests. wait_cell_kernel is the "kernel" wait mode: one resident thread polls the request's host-mapped
// completion cell with __nanosleep between reads, no other SM work. In "wait_value" mode
// cuStreamWaitValue32 holds the stream on the same cell instead (no SM).
#include "gpu/runtime_impl.hpp"
#include "gpuio/device.cuh"

namespace gpuio::detail {

namespace {
constexpr unsigned publish_threads = 256;

__global__ void publish_kernel(QueueRef q, uint32_t op, const int64_t* ids, int64_t* slot_ids, uint32_t n, void* mem,
                               uint32_t kind, uint32_t* cell) {
  if (ids != nullptr) {  // GPU-resident ids: into the slot (host-mapped: posted writes over PCIe)
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) slot_ids[i] = ids[i];
  }
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0) publish(q, op, slot_ids, n, mem, kind, cell);
}

__global__ void wait_cell_kernel(const uint32_t* cell) {
  uint32_t ns = 32;
  while (load_acquire_sys(cell) != 1u) {
    __nanosleep(ns);
    if (ns < 1024) ns *= 2;
  }
}
// stream_copy=kernel: one warp; lane 0 polls the cell (if any) as wait_cell_kernel does, then the warp copies
// the chunk from the host-mapped bounce slot with 16-byte loads that bypass the caches (__ldcv: the slot was
// rewritten by the CPU since its last use).
__global__ void wait_copy_kernel(const uint32_t* cell, const uint8_t* src, uint8_t* dst, size_t bytes) {
  if (cell != nullptr) {
    if (threadIdx.x == 0) {
      uint32_t ns = 32;
      while (load_acquire_sys(cell) != 1u) {
        __nanosleep(ns);
        if (ns < 1024) ns *= 2;
      }
    }
    __syncwarp();
  }
  if (((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) | bytes) & 15) == 0) {
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (size_t i = threadIdx.x; i < bytes / 16; i += blockDim.x) d[i] = __ldcv(s + i);
  } else {
    for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = __ldcv(src + i);
  }
}
}  // namespace

cudaError_t preload_stream_kernels() {
  cudaFuncAttributes attr{};  // see CudaMover::CudaMover: no lazy load while a wait kernel spins
  cudaError_t e = cudaFuncGetAttributes(&attr, publish_kernel);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attr, wait_copy_kernel);
  return e != cudaSuccess ? e : cudaFuncGetAttributes(&attr, wait_cell_kernel);
}

cudaError_t launch_wait_copy(cudaStream_t s, const uint32_t* cell_dev, const void* src, void* dst, size_t bytes) {
  wait_copy_kernel<<<1, 32, 0, s>>>(cell_dev, static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), bytes);
  return cudaGetLastError();
}

cudaError_t launch_publish(cudaStream_t s, QueueRef q, GpuOp op, const int64_t* ids, int64_t* slot_ids_dev,
                           uint32_t n, void* mem, MemKind kind, uint32_t* cell_dev) {
  publish_kernel<<<1, publish_threads, 0, s>>>(q, op, ids, slot_ids_dev, n, mem, kind == MemKind::device ? 1u : 0u,
                                               cell_dev);
  return cudaGetLastError();
}

cudaError_t launch_wait_cell(cudaStream_t s, const uint32_t* cell_dev) {
  wait_cell_kernel<<<1, 1, 0, s>>>(cell_dev);
  return cudaGetLastError();
}

}  // namespace gpuio::detail
