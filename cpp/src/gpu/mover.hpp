// Staging -> GPU movement for the engine's workers (DeviceMover). Each worker gets its own non-blocking
// CUDA stream, so copies never wait for user kernels (or the legacy default stream) and vice versa.
// Copies queued in one worker pass go out together, by one of three methods:
//   batch   - one cudaMemcpyBatchAsync call for all runs (copy engine, zero SMs);
//   percopy - one cudaMemcpyAsync per contiguous run (copy engine, zero SMs, one call each);
//   kernel  - one gather kernel reading the mapped staging pool (SMs, briefly).
// A ticket is an event recorded after the group; tickets complete in order.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpuio/engine.hpp"
#include "gpuio/gpu.hpp"

namespace gpuio::detail {

enum class CopyMode { batch, percopy, kernel };
const char* copy_mode_name(CopyMode m);
CopyMode parse_copy_mode(const std::string& s);  // throws std::invalid_argument naming s

struct CopyRun {
  void* dst;
  const void* src;  // device view of staging
  uint32_t len;
};

class CudaMover final : public DeviceMover {
 public:
  // staging: the engine's pool (already registered with CUDA as mapped memory by the caller).
  CudaMover(int device, FixedBuffer staging, CopyMode mode);
  ~CudaMover() override;

  void stage_out(uint32_t worker, void* dst, const void* staging, uint32_t len) override;
  uint64_t flush(uint32_t worker) override;
  int poll(uint32_t worker, uint64_t ticket) override;
  int stage_in(uint32_t worker, void* staging, const void* src, uint32_t len) override;

  void set_mode(CopyMode m) { mode_ = m; }
  CopyMode mode() const { return mode_; }
  uint64_t copies() const { return copies_.load(std::memory_order_relaxed); }
  uint64_t groups() const { return groups_.load(std::memory_order_relaxed); }
  uint64_t stage_ins() const { return stage_ins_.load(std::memory_order_relaxed); }

  // Times one group of `runs` scattered 4 KiB copies with each method (microseconds, median of reps);
  // a method that fails gets a negative time. Uses worker slot `worker` (call before workers use it).
  std::vector<double> measure(uint32_t worker, void* scratch_device, uint32_t runs, int reps);

 private:
  struct PerWorker;
  PerWorker& state(uint32_t worker);
  cudaError_t launch(PerWorker& w);

  int device_;
  FixedBuffer staging_;
  uint8_t* staging_dev_ = nullptr;  // device view of the staging pool
  std::atomic<CopyMode> mode_;
  std::vector<std::unique_ptr<PerWorker>> workers_;
  std::atomic<uint64_t> copies_{0}, groups_{0}, stage_ins_{0};
};

}  // namespace gpuio::detail
