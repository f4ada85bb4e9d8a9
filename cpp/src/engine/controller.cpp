#include "engine/controller.hpp"

#include "gpuio/status.hpp"

namespace gpuio::detail {

CoreController::CoreController(uint32_t min_active, uint32_t max_active, bool fixed)
    : min_(min_active), max_(max_active), fixed_(fixed), active_(max_active) {
  GPUIO_ASSERT(min_ >= 1 && min_ <= max_, "controller bounds");
}

void CoreController::observe(double io_seconds, double compute_seconds) {
  if (fixed_ || min_ == max_) return;
  std::lock_guard<std::mutex> g(mu_);
  io_sum_ += io_seconds;
  compute_sum_ += compute_seconds;
  if (++seen_ < window_batches) return;
  uint32_t a = active_.load(std::memory_order_relaxed);
  uint32_t next = a;
  if (io_sum_ > grow_ratio * compute_sum_ && a < max_) next = a + 1;
  else if (io_sum_ < shrink_ratio * compute_sum_ && a > min_) next = a - 1;
  if (next != a) {
    active_.store(next, std::memory_order_relaxed);
    adjustments_.fetch_add(1, std::memory_order_relaxed);
  }
  io_sum_ = compute_sum_ = 0;
  seen_ = 0;
}

}  // namespace gpuio::detail
