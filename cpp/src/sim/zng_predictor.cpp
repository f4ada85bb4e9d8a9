// ZnG read-prefetch control: the PC-indexed predictor and the access monitor.
#include <algorithm>
#include <stdexcept>

#include "gpuio/zng.hpp"

namespace gpuio::zng {

bool Predictor::observe(uint32_t pc, uint64_t addr, uint64_t reach_bytes) {
  uint32_t e = pc % kEntries;
  bool predicted = counter_[e] > kThreshold;
  if (seen_[e]) {
    bool regular = false;
    for (uint32_t i = 0; i < seen_[e]; ++i) {
      uint64_t h = last_addr_[e][i];
      regular |= (addr >= h ? addr - h : h - addr) <= reach_bytes;
    }
    ++decisions_;
    if (predicted == regular) ++correct_;
    if (regular && counter_[e] < kMax) ++counter_[e];
    if (!regular && counter_[e] > 0) --counter_[e];
  }
  last_addr_[e][head_[e]] = addr;
  head_[e] = static_cast<uint8_t>((head_[e] + 1) % kHistory);
  if (seen_[e] < kHistory) ++seen_[e];
  return predicted;
}

void Predictor::feedback(uint32_t pc, bool used) {
  uint8_t& c = counter_[pc % kEntries];
  if (used) {
    ++used_;
    if (c < kMax) ++c;
  } else {
    ++unused_;
    if (c > 0) --c;
  }
}

AccessMonitor::AccessMonitor(uint32_t initial_bytes, uint32_t min_bytes, uint32_t max_bytes, uint32_t epoch_lines)
    : bytes_(initial_bytes), min_(min_bytes), max_(max_bytes), epoch_(epoch_lines) {
  if (!(min_bytes > 0 && min_bytes <= initial_bytes && initial_bytes <= max_bytes) || epoch_lines == 0)
    throw std::invalid_argument("access monitor: need 0 < min <= initial <= max prefetch bytes and epoch > 0 (got " +
                                std::to_string(min_bytes) + ", " + std::to_string(initial_bytes) + ", " +
                                std::to_string(max_bytes) + ", epoch " + std::to_string(epoch_lines) + ")");
}

void AccessMonitor::prefetched(uint32_t lines) {
  prefetched_ += lines;
  if (prefetched_ >= epoch_) end_epoch();
}

void AccessMonitor::end_epoch() {
  double waste = static_cast<double>(wasted_) / static_cast<double>(prefetched_);
  if (waste > 0.3 && bytes_ / 2 >= min_) {
    bytes_ /= 2;
    ++halvings_;
  } else if (waste < 0.05 && bytes_ + 1024 <= max_) {
    bytes_ += 1024;
    ++growths_;
  }
  prefetched_ = 0;
  wasted_ = 0;
}

std::vector<std::string> platform_names() {
  return {"hetero", "hybridgpu", "zng-base", "zng-rdopt", "zng-wropt", "zng"};
}

std::string platform_name(Platform p) { return platform_names()[static_cast<size_t>(p)]; }

Platform parse_platform(const std::string& name) {
  auto names = platform_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<Platform>(i);
  std::string known;
  for (auto& n : names) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown ZnG platform '" + name + "': expected one of " + known);
}

ZngConfig platform_config(Platform p) {
  ZngConfig c;
  c.platform = p;
  bool rd = p == Platform::zng_rdopt || p == Platform::zng;
  bool wr = p == Platform::zng_wropt || p == Platform::zng;
  c.read_prefetch = c.flash_network = rd;
  c.register_write_buffer = c.grouped_registers = c.pin_on_thrash = wr;
  return c;
}

}  // namespace gpuio::zng
