#include "engine/controller.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gpuio/status.hpp"

namespace gpuio::detail {

RateClimb::RateClimb(uint32_t lo, uint32_t hi, uint32_t start, double gain)
    : lo_(lo), hi_(hi), start_(std::clamp(start, lo, hi)), gain_(gain), rate_(hi + 1, 0.0), seen_(hi + 1, 0) {
  GPUIO_ASSERT(lo_ >= 1 && lo_ <= hi_, "rate climb bounds");
}

void RateClimb::restart(uint32_t from) {
  if (windows_ > 0 || settled_) ++searches_;
  std::fill(rate_.begin(), rate_.end(), 0.0);
  std::fill(seen_.begin(), seen_.end(), 0u);
  start_ = std::clamp(from, lo_, hi_);
  settled_ = false;
  drifting_ = drift_side_ = settled_windows_ = 0;
  windows_ = 0;
}

uint32_t RateClimb::choice() const {
  double best = 0;
  for (uint32_t k = lo_; k <= hi_; ++k) best = std::max(best, rate_[k]);
  if (best <= 0) return start_;
  for (uint32_t k = lo_; k <= hi_; ++k) {
    if (rate_[k] > 0 && rate_[k] * (1 + gain_) >= best) return k;
  }
  return start_;  // unreachable: the best one qualifies
}

uint32_t RateClimb::next_probe() const {
  // 1. The ladder: the start count doubled up to hi, halved down to lo (a distant best in a few probes, and
  // every region of a curve with bumps seen: counts that divide the devices evenly run better than their neighbours).
  for (uint32_t k = start_;; k = std::min(hi_, 2 * k)) {
    if (rate_[k] <= 0) return k;
    if (k == hi_) break;
  }
  for (uint32_t k = start_; k > lo_;) {
    k = std::max(lo_, k / 2);
    if (rate_[k] <= 0) return k;
  }
  // 2. Bisect the unmeasured gaps next to the best measured count until both its neighbours are measured.
  uint32_t b = lo_;
  for (uint32_t k = lo_; k <= hi_; ++k) b = rate_[k] > rate_[b] ? k : b;
  uint32_t above = 0, below = 0;  // the nearest measured counts on either side (0: none, b is a bound)
  for (uint32_t k = b + 1; k <= hi_ && !above; ++k) above = rate_[k] > 0 ? k : 0;
  for (uint32_t k = b; k-- > lo_ && !below;) below = rate_[k] > 0 ? k : 0;
  if (above && above - b > 1) return (b + above) / 2;
  if (below && b - below > 1) return (below + b) / 2;
  // 3. Confirm: the best and the choice measured confirm_windows times (a noisy first window moves the pick).
  if (seen_[b] < confirm_windows) return b;
  const uint32_t c = choice();
  if (seen_[c] < confirm_windows) return c;
  return 0;
}

uint32_t RateClimb::observe(uint32_t at, double rate) {
  if (at < lo_ || at > hi_ || !(rate > 0)) return at;
  ++windows_;
  const uint32_t n = std::min<uint32_t>(seen_[at], average_max - 1);
  rate_[at] = (rate_[at] * n + rate) / (n + 1);
  ++seen_[at];
  if (settled_) {
    const double off = rate / settled_rate_ - 1;
    const int side = off > drift ? 1 : off < -drift ? -1 : 0;
    drifting_ = side == 0 ? 0 : side == drift_side_ ? drifting_ + 1 : 1;
    drift_side_ = side;
    if (side == 0) settled_rate_ += follow * (rate - settled_rate_);
    if (drifting_ < drift_windows && ++settled_windows_ < forget_windows) return at;
    restart(at);  // search again from here, this window its first measurement
    windows_ = 1;
    rate_[at] = rate;
    seen_[at] = 1;
  }
  if (uint32_t p = next_probe()) return p;
  settled_ = true;
  const uint32_t c = choice();
  settled_rate_ = rate_[c];
  settled_windows_ = drifting_ = drift_side_ = 0;
  return c;
}

CoreController::CoreController(uint32_t min_active, uint32_t max_active, bool fixed, uint32_t start)
    : min_(min_active),
      max_(max_active),
      fixed_(fixed),
      active_(fixed || start == 0 ? max_active : std::clamp(start, min_active, max_active)),
      climb_(min_active, max_active, active_.load(), rate_gain) {
  GPUIO_ASSERT(min_ >= 1 && min_ <= max_, "controller bounds");
}

std::vector<double> CoreController::rates() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<double> r(max_ + 1, 0.0);
  for (uint32_t k = 0; k <= max_; ++k) r[k] = climb_.rate(k);
  return r;
}

bool CoreController::settled() const {
  std::lock_guard<std::mutex> g(mu_);
  return fixed_ || min_ == max_ || climb_.settled();
}

std::string CoreController::state() const {
  std::lock_guard<std::mutex> g(mu_);
  const uint32_t a = active();
  char buf[128];
  if (fixed_ || min_ == max_) {
    std::snprintf(buf, sizeof buf, "fixed %u", a);
  } else if (climb_.settled()) {
    std::snprintf(buf, sizeof buf, "settled at %u of %u (%.3g blocks/s; search %u)", a, max_, climb_.rate(a),
                  climb_.searches());
  } else {
    std::snprintf(buf, sizeof buf, "searching at %u of %u (%u windows; search %u)", a, max_, climb_.windows(),
                  climb_.searches());
  }
  return buf;
}

void CoreController::set_active(uint32_t next) {
  if (next == active()) return;
  active_.store(next, std::memory_order_relaxed);
  adjustments_.fetch_add(1, std::memory_order_relaxed);
}

void CoreController::observe(double io_seconds, double compute_seconds, uint64_t blocks, double now_seconds,
                             uint32_t planned_active) {
  if (fixed_ || min_ == max_) return;
  std::lock_guard<std::mutex> g(mu_);
  io_sum_ += io_seconds;
  compute_sum_ += compute_seconds;
  const uint32_t a = active();
  const bool io_bound = io_sum_ > grow_ratio * compute_sum_, compute_bound = io_sum_ < shrink_ratio * compute_sum_;
  if (blocks == 0) {  // no rates: the I/O-vs-compute rule alone
    if (++seen_ < window_batches) return;
    set_active(io_bound && a < max_ ? a + 1 : compute_bound && a > min_ ? a - 1 : a);
    io_sum_ = compute_sum_ = 0;
    seen_ = 0;
    return;
  }
  const bool fresh = planned_active == 0 || planned_active == a;
  if (window_start_ < 0 || !fresh) {  // the window starts at this completion; this batch is not rated
    window_start_ = now_seconds;
    blocks_sum_ = 0;
    fresh_ = 0;
    return;
  }
  blocks_sum_ += blocks;
  ++fresh_;
  const double wall = now_seconds - window_start_;
  if (fresh_ < rated_batches_min || wall < (climb_.settled() ? settled_seconds_min : rated_seconds_min)) return;
  uint32_t next = a;
  if (io_bound) {
    next = climb_.observe(a, static_cast<double>(blocks_sum_) / wall);
  } else if (compute_bound) {  // the rate is the caller's: leave it a core, search again once I/O-bound
    next = a > min_ ? a - 1 : a;
    climb_.restart(next);
  }
  set_active(next);
  io_sum_ = compute_sum_ = 0;
  blocks_sum_ = 0;
  fresh_ = 0;
  window_start_ = now_seconds;
}

}  // namespace gpuio::detail
