#include "sim/latency.hpp"

#include <algorithm>
#include <cmath>

namespace gpuio::sim::detail {

uint64_t LatencyHistogram::percentile(double q) const {
  if (count_ == 0) return 0;
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t seen = 0;
  for (uint32_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      uint64_t lo = lower_bound(i), hi = lower_bound(i + 1);
      return std::min(max_, lo + (hi - lo) / 2);
    }
  }
  return max_;
}

LatencySummary LatencyHistogram::summary() const {
  LatencySummary s;
  s.count = count_;
  if (count_ == 0) return s;
  s.mean_ns = sum_ / count_;
  s.p50_ns = percentile(0.50);
  s.p99_ns = percentile(0.99);
  s.p999_ns = percentile(0.999);
  s.max_ns = max_;
  return s;
}

}  // namespace gpuio::sim::detail
