// CAM's dynamic core adjustment: the number of active workers moves between ceil(N/4) and ceil(N/2)
// for N devices, from the measured I/O time of recent batches against the compute time between them.
// When I/O takes longer than the caller's compute, more workers help; when it is far shorter, fewer
// workers leave cores to the application.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>

namespace gpuio::detail {

class CoreController {
 public:
  // fixed: the user chose the worker count; active() never moves.
  CoreController(uint32_t min_active, uint32_t max_active, bool fixed);
  uint32_t active() const { return active_.load(std::memory_order_relaxed); }
  uint64_t adjustments() const { return adjustments_.load(std::memory_order_relaxed); }
  // One finished batch: its I/O time and the compute gap before its submission (0 if batches overlapped).
  void observe(double io_seconds, double compute_seconds);

  static constexpr int window_batches = 8;  // decisions are taken once per window
  static constexpr double grow_ratio = 1.1;   // io > 1.1 x compute -> one more worker
  static constexpr double shrink_ratio = 0.5; // io < 0.5 x compute -> one fewer

 private:
  uint32_t min_, max_;
  bool fixed_;
  std::atomic<uint32_t> active_;
  std::atomic<uint64_t> adjustments_{0};
  std::mutex mu_;
  double io_sum_ = 0, compute_sum_ = 0;
  int seen_ = 0;
};

}  // namespace gpuio::detail
