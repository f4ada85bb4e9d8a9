#include "gpu/cuda_check.hpp"

namespace gpuio::detail {

void* driver_entry_point(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  // Version 12000: the v2 stream memory operations (always supported by CUDA 12+ drivers, per their docs).
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess) return nullptr;
  return found == cudaDriverEntryPointSuccess ? fn : nullptr;
}

}  // namespace gpuio::detail
