// CAM's dynamic core adjustment: the number of active workers moves between ceil(N/4) and ceil(N/2)
// for N devices, from the measured I/O time of recent batches against the compute time between them.
// When I/O takes longer than the caller's compute, more workers may help; when it is far shorter, fewer
// workers leave cores to the application. Where batches report their size, the controller also measures the
// rate (blocks per second of wall time) each worker count delivered and, while I/O-bound, climbs to the count
// with the best rate: a neighbour count not yet measured is tried, a measured one is taken only when it was
// rate_gain better. Equal rates walk down to fewer workers (cores left to the application); a count whose extra
// worker bought nothing (more workers than free cores, a device-bound rate) is left.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace gpuio::detail {

class CoreController {
 public:
  // fixed: the user chose the worker count; active() never moves.
  CoreController(uint32_t min_active, uint32_t max_active, bool fixed);
  uint32_t active() const { return active_.load(std::memory_order_relaxed); }
  uint64_t adjustments() const { return adjustments_.load(std::memory_order_relaxed); }
  // One finished batch: its I/O time, the compute gap before its submission (0 if batches overlapped), its size
  // in blocks and the time it finished (seconds on a monotonic clock). blocks = 0: no rate information (the
  // I/O-vs-compute rule alone decides).
  void observe(double io_seconds, double compute_seconds, uint64_t blocks = 0, double now_seconds = 0);
  // Blocks per second measured at each worker count (index = count; 0 where not measured), for stats and tests.
  std::vector<double> rates() const;

  static constexpr int window_batches = 8;    // decisions are taken once per window
  static constexpr double grow_ratio = 1.1;   // io > 1.1 x compute: I/O-bound
  static constexpr double shrink_ratio = 0.5; // io < 0.5 x compute -> one fewer
  static constexpr double rate_gain = 0.05;   // a measured neighbour count must be this much faster to move to it
  static constexpr int forget_windows = 64;   // measured rates are dropped this often (conditions change)

 private:
  uint32_t pick_by_rate(uint32_t a) const;

  uint32_t min_, max_;
  bool fixed_;
  std::atomic<uint32_t> active_;
  std::atomic<uint64_t> adjustments_{0};
  mutable std::mutex mu_;
  double io_sum_ = 0, compute_sum_ = 0;
  uint64_t blocks_sum_ = 0;
  double window_start_ = -1;  // when the current window began (the previous window's end)
  int seen_ = 0, windows_ = 0;
  bool settling_ = false;  // the window after a change still ran batches planned for the old count: not rated
  std::vector<double> rate_;  // blocks/s by worker count
};

}  // namespace gpuio::detail
