#include "engine/controller.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gpuio/status.hpp"

namespace gpuio::detail {

RateClimb::RateClimb(uint32_t lo, uint32_t hi, uint32_t start, double gain)
    : lo_(lo), hi_(hi), start_(std::clamp(start, lo, hi)), gain_(gain), samples_(hi + 1) {
  GPUIO_ASSERT(lo_ >= 1 && lo_ <= hi_, "rate climb bounds");
}

void RateClimb::restart(uint32_t from) {
  if (windows_ > 0 || settled_) ++searches_;
  for (auto& s : samples_) s.clear();
  round_.clear();
  contenders_.clear();
  start_ = std::clamp(from, lo_, hi_);
  final_ = settled_ = false;
  drifting_ = drift_side_ = settled_windows_ = 0;
  windows_ = rounds_ = 0;
}

double RateClimb::rate(uint32_t k) const {
  if (k >= samples_.size() || samples_[k].empty()) return 0.0;
  std::vector<double> x = samples_[k];
  const size_t n = x.size();
  if (n <= 2) return *std::max_element(x.begin(), x.end());  // a cold or stalled window only ever reads low
  std::nth_element(x.begin(), x.begin() + n / 2, x.end());
  const double hi = x[n / 2];
  if (n % 2) return hi;
  return (*std::max_element(x.begin(), x.begin() + n / 2) + hi) / 2;
}

double RateClimb::stderr_rel(uint32_t k) const {
  const size_t n = samples_[k].size();
  if (n < 3) return 1.0;  // one or two windows say nothing about their noise
  const double m = rate(k);
  std::vector<double> dev;
  for (double x : samples_[k]) dev.push_back(std::fabs(x - m));
  std::nth_element(dev.begin(), dev.begin() + n / 2, dev.end());
  // sigma from the median absolute deviation (1.4826: normal noise), the median's standard error 1.2533 sigma/sqrt(n)
  const double sigma = std::max(noise_floor, 1.4826 * dev[n / 2] / m);
  return 1.2533 * sigma / std::sqrt(static_cast<double>(n));
}

uint32_t RateClimb::best() const {
  uint32_t b = 0;
  double r = 0;
  for (uint32_t k = lo_; k <= hi_; ++k) {
    const double x = rate(k);
    if (x > r) b = k, r = x;  // ties: the fewer workers
  }
  return b;
}

bool RateClimb::qualifies(uint32_t k, uint32_t b) const {
  const double mb = rate(b), se = std::hypot(stderr_rel(k), stderr_rel(b));
  return rate(k) * (1 + gain_) / mb - 1 >= resolve_z * se;
}

uint32_t RateClimb::choice() const {
  const uint32_t b = best();
  if (b == 0) return start_;
  for (uint32_t k = lo_; k < b; ++k) {
    if (!samples_[k].empty() && qualifies(k, b)) return k;
  }
  return b;
}

uint32_t RateClimb::screen_probe() const {
  auto measured = [&](uint32_t k) { return !samples_[k].empty(); };
  // 1. The ladder: the start count doubled up to hi, halved down to lo (a distant best in a few probes, and
  // every region of a curve with bumps seen: counts that divide the devices evenly can run better than their
  // neighbours).
  for (uint32_t k = start_;; k = std::min(hi_, 2 * k)) {
    if (!measured(k)) return k;
    if (k == hi_) break;
  }
  for (uint32_t k = start_; k > lo_;) {
    k = std::max(lo_, k / 2);
    if (!measured(k)) return k;
  }
  // 2. Bisect the unmeasured gaps next to the best measured count until both its neighbours are measured.
  const uint32_t b = best();
  if (b == 0) return start_;
  uint32_t above = 0, below = 0;  // the nearest measured counts on either side (0: none, b is a bound)
  for (uint32_t k = b + 1; k <= hi_ && !above; ++k) above = measured(k) ? k : 0;
  for (uint32_t k = b; k-- > lo_ && !below;) below = measured(k) ? k : 0;
  if (above && above - b > 1) return (b + above) / 2;
  if (below && b - below > 1) return (below + b) / 2;
  // 3. A second window of every count measured once that is not far below the best, from the top: a count whose one
  // window was cold (the first of a search) or stalled would otherwise never contend.
  for (uint32_t k = hi_; k >= lo_ && k > 0; --k) {
    if (samples_[k].size() == 1 && rate(k) >= rescreen_floor * rate(b)) return k;
  }
  return 0;
}

// The contenders: the best, the fewest workers within gain of it (the choice if the rounds confirm it), then the
// next fastest within `contend`; visited ascending in even rounds, descending in odd ones.
void RateClimb::plan_round() {
  const uint32_t b = best();
  const double mb = rate(b);
  std::vector<uint32_t> c = {b};
  for (uint32_t k = lo_; k < b; ++k) {
    if (rate(k) > 0 && rate(k) * (1 + gain_) >= mb) {
      c.push_back(k);
      break;
    }
  }
  std::vector<uint32_t> rest;
  for (uint32_t k = lo_; k <= hi_; ++k) {
    if (rate(k) >= (1 - contend) * mb && std::find(c.begin(), c.end(), k) == c.end()) rest.push_back(k);
  }
  std::stable_sort(rest.begin(), rest.end(), [&](uint32_t x, uint32_t y) { return rate(x) > rate(y); });
  for (uint32_t k : rest) {
    if (c.size() >= contenders_max) break;
    c.push_back(k);
  }
  std::sort(c.begin(), c.end());
  contenders_ = c;
  if (rounds_ % 2 == 0) std::reverse(c.begin(), c.end());  // round_.back() is visited first
  round_ = c;
}

bool RateClimb::resolved() const {
  const uint32_t b = best();
  const double mb = rate(b);
  if (std::find(contenders_.begin(), contenders_.end(), b) == contenders_.end()) return false;
  for (uint32_t k : contenders_) {
    if (k == b) continue;
    const double se = resolve_z * std::hypot(stderr_rel(k), stderr_rel(b)), x = rate(k) / mb;
    if (std::fabs(x - 1) < se || std::fabs(x * (1 + gain_) - 1) < se) return false;
  }
  return true;
}

void RateClimb::settle() {
  settled_ = true;
  round_.clear();
  settled_rate_ = rate(choice());
  settled_windows_ = drifting_ = drift_side_ = 0;
}

uint32_t RateClimb::observe(uint32_t at, double rate_now) {
  if (at < lo_ || at > hi_ || !(rate_now > 0)) return at;
  ++windows_;
  auto add = [&] {
    std::vector<double>& s = samples_[at];
    if (s.size() == samples_max) s.erase(s.begin());
    s.push_back(rate_now);
  };
  if (settled_) {
    const double off = rate_now / settled_rate_ - 1;
    const int side = off > drift ? 1 : off < -drift ? -1 : 0;
    drifting_ = side == 0 ? 0 : side == drift_side_ ? drifting_ + 1 : 1;
    drift_side_ = side;
    if (side == 0) settled_rate_ += follow * (rate_now - settled_rate_);
    if (drifting_ < drift_windows && ++settled_windows_ < forget_windows) return at;
    restart(at);  // search again from here, this window its first measurement
    windows_ = 1;
  }
  add();
  if (final_ && !round_.empty() && round_.back() == at) {
    round_.pop_back();
    if (round_.empty()) ++rounds_;
  }
  if (!final_ || round_.empty()) {
    if (uint32_t p = screen_probe()) return p;  // also in the final rounds: a new best next to an unmeasured gap
    final_ = true;
  }
  if (round_.empty()) {
    if (rounds_ >= final_rounds_max || (rounds_ >= final_rounds_min && resolved())) {
      settle();
      return choice();
    }
    plan_round();
  }
  return round_.back();
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
  const bool long_window = climb_.settled() || climb_.final_rounds();
  if (fresh_ < rated_batches_min || wall < (long_window ? settled_seconds_min : rated_seconds_min)) return;
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
