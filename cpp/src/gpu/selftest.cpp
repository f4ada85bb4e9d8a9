// Bounded self-test of cuStreamWaitValue32 on a host-mapped word (DESIGN.md: it never released on the GPU
// machine). A stream that never releases stays stuck, so callers run this in a throw-away process.
#include <cuda.h>

#include <chrono>
#include <thread>

#include "gpu/cuda_check.hpp"
#include "gpu/host_alloc.hpp"
#include "gpuio/gpu.hpp"

namespace gpuio::gpu {

std::string stream_wait_selftest(int timeout_ms) {
  using WaitFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  auto wait = reinterpret_cast<WaitFn>(detail::driver_entry_point("cuStreamWaitValue32"));
  if (!wait) return "error: the driver has no cuStreamWaitValue32";
  uint32_t* word = nullptr;
  void* dev = nullptr;
  cudaStream_t s = nullptr;
  if (detail::host_alloc(reinterpret_cast<void**>(&word), 4, cudaHostAllocMapped, "selftest") != cudaSuccess ||
      cudaHostGetDevicePointer(&dev, word, 0) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
    return "error: " + detail::cuda_error_text(cudaGetLastError());
  }
  __atomic_store_n(word, 0u, __ATOMIC_RELEASE);
  CUresult r = wait(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(dev), 1, CU_STREAM_WAIT_VALUE_GEQ);
  if (r != CUDA_SUCCESS) return "error: cuStreamWaitValue32 returned " + std::to_string(static_cast<int>(r));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (cudaStreamQuery(s) == cudaSuccess) return "error: the wait did not block (released before the write)";
  __atomic_store_n(word, 1u, __ATOMIC_RELEASE);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess) {
      cudaStreamDestroy(s);
      detail::host_free(word);
      return "works";
    }
    if (q != cudaErrorNotReady) return "error: " + detail::cuda_error_text(q);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return "never released";  // the stream and word are left as they are: the process should exit
}

}  // namespace gpuio::gpu
