// CUDA error checks for the GPU layer, and driver entry points reached through the runtime (no libcuda link).
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace gpuio::detail {

inline std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

// A CUDA call that must succeed; failures throw std::runtime_error naming the call.
#define GPUIO_CUDA(call)                                                                                   \
  do {                                                                                                     \
    cudaError_t gpuio_e_ = (call);                                                                         \
    if (gpuio_e_ != cudaSuccess)                                                                           \
      throw std::runtime_error(std::string(#call) + " failed: " + ::gpuio::detail::cuda_error_text(gpuio_e_)); \
  } while (0)

// Looks up a driver API function by name (e.g. "cuStreamWaitValue32"); nullptr where the driver lacks it.
void* driver_entry_point(const char* name);

}  // namespace gpuio::detail
