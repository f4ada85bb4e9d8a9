// A shared resource (channel bus, host link) as a list of reserved intervals, so a transfer that is ready
// early can use a gap before transfers reserved earlier for later times (a bus arbiter serves whoever is
// ready; a single busy-until stamp would make it first-come-first-served by submission order and stall
// idle planes behind busy ones). Intervals ending before `now` are dropped; adjacent ones merge, so under
// saturation the list stays short. No allocation once the vector reached its working size.
#pragma once
#include <cstdint>
#include <vector>

namespace gpuio::sim::detail {

class Timeline {
 public:
  // Earliest start >= ready with dur free; reserves it and returns its end.
  uint64_t reserve(uint64_t ready, uint64_t dur, uint64_t now) {
    size_t drop = 0;
    while (drop < busy_.size() && busy_[drop].end <= now) ++drop;
    if (drop) busy_.erase(busy_.begin(), busy_.begin() + static_cast<std::ptrdiff_t>(drop));
    uint64_t t = ready;
    size_t i = 0;
    for (; i < busy_.size(); ++i) {
      if (busy_[i].end <= t) continue;
      if (busy_[i].start >= t + dur) break;
      t = busy_[i].end;
    }
    uint64_t end = t + dur;
    bool joins_prev = i > 0 && busy_[i - 1].end == t, joins_next = i < busy_.size() && busy_[i].start == end;
    if (joins_prev && joins_next) {
      busy_[i - 1].end = busy_[i].end;
      busy_.erase(busy_.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (joins_prev) {
      busy_[i - 1].end = end;
    } else if (joins_next) {
      busy_[i].start = t;
    } else {
      busy_.insert(busy_.begin() + static_cast<std::ptrdiff_t>(i), Interval{t, end});
    }
    return end;
  }
  uint64_t busy_until() const { return busy_.empty() ? 0 : busy_.back().end; }
  size_t intervals() const { return busy_.size(); }

 private:
  struct Interval {
    uint64_t start, end;
  };
  std::vector<Interval> busy_;
};

}  // namespace gpuio::sim::detail
