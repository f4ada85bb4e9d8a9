// Stream-ordered requests: a one-thread kernel publishes the request (sequence number taken on the GPU, so
// CUDA-graph replays publish fresh requests) and, in "kernel" wait mode, polls the host-mapped completion
// word with __nanosleep between reads: one resident thread, no other SM work. In "wait_value" mode the kernel
// returns at once and cuStreamWaitValue32 on the request's host-mapped flag holds the stream (no SM).
#include "gpu/runtime_impl.hpp"
#include "gpuio/device.cuh"

namespace gpuio::detail {

namespace {
__global__ void publish_kernel(QueueRef q, uint32_t op, const int64_t* ids, uint32_t n, void* mem, uint32_t kind,
                               uint32_t* cell, bool wait) {
  uint32_t failures_before = load_acquire_sys(&q.shared->failures);
  uint32_t seq = publish(q, op, ids, n, mem, kind, cell);
  if (wait) wait_done(q, seq, failures_before);
}
}  // namespace

cudaError_t preload_stream_kernels() {
  cudaFuncAttributes attr{};  // see CudaMover::CudaMover: no lazy load while a wait kernel spins
  return cudaFuncGetAttributes(&attr, publish_kernel);
}

cudaError_t launch_publish(cudaStream_t s, QueueRef q, GpuOp op, const int64_t* ids, uint32_t n, void* mem,
                           MemKind kind, uint32_t* cell, bool wait_in_kernel) {
  publish_kernel<<<1, 1, 0, s>>>(q, op, ids, n, mem, kind == MemKind::device ? 1u : 0u, cell, wait_in_kernel);
  return cudaGetLastError();
}

}  // namespace gpuio::detail
