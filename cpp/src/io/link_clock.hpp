// The paced null device's timing (sim backend with null_paced=1): a device with a read latency and a link rate
// of its own whose cost to the host is bookkeeping only, as a real NVMe drive does its flash work and its DMA in
// its own hardware. Per device, requests complete in submission order at
//   due_1 = max(arrival + latency, last + t(b_1)),   due_j = max(arrival + latency, due_{j-1} + t(b_j)),
// where last is the device's previous completion and t(b) = b bytes over the link (b * 1000 / link_mb_s ns; MB/s =
// bytes/us). Idle, a read takes `latency`; loaded, the device completes link_mb_s bytes per microsecond. For a run
// of requests that arrive together this solves to due_j = base + t(b_1 + ... + b_j) with
// base = max(arrival + latency, last + t(b_1)) - t(b_1), so a submission reserves a whole run on a device with one
// compare-and-swap: O(tens of ns) per submission and per device, no lock, nothing per byte.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>

namespace gpuio::detail {

class LinkClock {
 public:
  LinkClock(uint64_t latency_ns, uint32_t link_mb_s) : latency_ns_(latency_ns), link_mb_s_(link_mb_s) {}
  uint64_t latency_ns() const { return latency_ns_; }
  uint32_t link_mb_s() const { return link_mb_s_; }
  // Nanoseconds `bytes` take over the link (cumulative bytes of a run give exact cumulative times: no rounding
  // drift over a run).
  uint64_t xfer_ns(uint64_t bytes) const { return bytes * 1000 / link_mb_s_; }
  // Reserves a run of requests arriving together at arrival_ns: the first of first_bytes, all of run_bytes.
  // Returns base: the j-th request of the run is due at base + xfer_ns(bytes of requests 1..j). Thread-safe (any
  // number of queues on one device); runs of two queues on one device are served one after the other.
  uint64_t reserve(uint64_t arrival_ns, uint64_t first_bytes, uint64_t run_bytes) {
    const uint64_t first = xfer_ns(first_bytes), run = xfer_ns(run_bytes);
    uint64_t last = last_ns_.load(std::memory_order_relaxed);
    for (;;) {
      uint64_t base = std::max(arrival_ns + latency_ns_, last + first) - first;
      if (last_ns_.compare_exchange_weak(last, base + run, std::memory_order_relaxed)) return base;
    }
  }
  uint64_t last_due_ns() const { return last_ns_.load(std::memory_order_relaxed); }

 private:
  const uint64_t latency_ns_;
  const uint32_t link_mb_s_;
  std::atomic<uint64_t> last_ns_{0};
};

}  // namespace gpuio::detail
