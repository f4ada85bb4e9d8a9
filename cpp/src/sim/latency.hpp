// Log-linear latency histogram: 32 sub-buckets per power of two (<= 3.2% error), fixed size, no
// allocation per sample, deterministic. Percentiles report the bucket's midpoint.
#pragma once
#include <array>
#include <cstdint>

#include "gpuio/sim.hpp"

namespace gpuio::sim::detail {

class LatencyHistogram {
 public:
  void add(uint64_t v) {
    ++counts_[index(v)];
    ++count_;
    sum_ += v;
    if (v > max_) max_ = v;
  }
  uint64_t count() const { return count_; }
  uint64_t percentile(double q) const;  // q in [0, 1]
  LatencySummary summary() const;
  static uint32_t index(uint64_t v) {
    if (v < 64) return static_cast<uint32_t>(v);
    uint32_t msb = 63u - static_cast<uint32_t>(__builtin_clzll(v));
    uint32_t shift = msb - 5;
    return shift * 32 + static_cast<uint32_t>(v >> shift);
  }
  static uint64_t lower_bound(uint32_t idx) {
    if (idx < 64) return idx;
    uint32_t shift = idx / 32 - 1;
    return static_cast<uint64_t>(idx - shift * 32) << shift;
  }

 private:
  static constexpr uint32_t kBuckets = 59 * 32 + 64;
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0, sum_ = 0, max_ = 0;
};

}  // namespace gpuio::sim::detail
