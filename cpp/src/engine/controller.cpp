#include "engine/controller.hpp"

#include "gpuio/status.hpp"

namespace gpuio::detail {

CoreController::CoreController(uint32_t min_active, uint32_t max_active, bool fixed)
    : min_(min_active), max_(max_active), fixed_(fixed), active_(max_active), rate_(max_active + 2, 0.0) {
  GPUIO_ASSERT(min_ >= 1 && min_ <= max_, "controller bounds");
}

std::vector<double> CoreController::rates() const {
  std::lock_guard<std::mutex> g(mu_);
  return rate_;
}

uint32_t CoreController::pick_by_rate(uint32_t a) const {
  if (a < max_ && rate_[a + 1] == 0) return a + 1;  // not measured yet: try it
  if (a > min_ && rate_[a - 1] == 0) return a - 1;
  uint32_t best = a;
  double best_rate = rate_[a] * (1 + rate_gain);
  if (a < max_ && rate_[a + 1] > best_rate) best = a + 1, best_rate = rate_[a + 1];
  if (a > min_ && rate_[a - 1] > best_rate) best = a - 1;
  return best;
}

void CoreController::observe(double io_seconds, double compute_seconds, uint64_t blocks, double now_seconds) {
  if (fixed_ || min_ == max_) return;
  std::lock_guard<std::mutex> g(mu_);
  io_sum_ += io_seconds;
  compute_sum_ += compute_seconds;
  blocks_sum_ += blocks;
  if (window_start_ < 0) window_start_ = now_seconds - io_seconds;  // the first batch's submission
  if (++seen_ < window_batches) return;
  uint32_t a = active_.load(std::memory_order_relaxed);
  double wall = now_seconds - window_start_;
  bool rated = blocks_sum_ > 0 && wall > 0;
  if (rated && !settling_) rate_[a] = static_cast<double>(blocks_sum_) / wall;
  bool settled = !settling_;
  settling_ = false;
  if (++windows_ % forget_windows == 0) rate_.assign(rate_.size(), 0.0);
  uint32_t next = a;
  if (io_sum_ > grow_ratio * compute_sum_) {
    next = !rated ? (a < max_ ? a + 1 : a) : settled ? pick_by_rate(a) : a;
  } else if (io_sum_ < shrink_ratio * compute_sum_ && a > min_) {
    next = a - 1;
  }
  if (next != a) {
    active_.store(next, std::memory_order_relaxed);
    adjustments_.fetch_add(1, std::memory_order_relaxed);
    settling_ = rated;
  }
  io_sum_ = compute_sum_ = 0;
  blocks_sum_ = 0;
  seen_ = 0;
  window_start_ = now_seconds;
}

}  // namespace gpuio::detail
