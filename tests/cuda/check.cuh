// CHECK(call) for the standalone CUDA test programs: a failing CUDA call prints its name and error, and the
// test's main returns 1.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>

#define CHECK(x)                                                                   \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      std::printf("FAIL %s: %s\n", #x, cudaGetErrorString(e_));                   \
      return 1;                                                                    \
    }                                                                              \
  } while (0)
