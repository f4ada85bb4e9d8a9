// CAM's dynamic core count, from measured rates. The engine starts `threads` workers (workers=0: at least CAM's
// ceil(N/2) for N devices, up to the CPUs the process may use: limits::auto_worker_threads) and the controller
// moves how many of them get work. CAM's N/4..N/2 rule only seeds the search: on the H100 (issue 14) the best
// hand-picked count was often above N/2 (an emulated device or an io_uring submit/reap costs worker CPU), so the
// controller measures the rate (blocks per second of wall time) each count delivers and hill-climbs on it.
//
// RateClimb is the decision logic alone (no clock, no threads: tests feed it synthetic rate curves). CoreController
// cuts the engine's finished batches into measurement windows and feeds it: a batch planned for another worker count
// than the one in force is not rated (it ran, at least partly, under the old count), so a change settles within the
// batches in flight. While the caller computes more than it waits for I/O, the rates measure the caller, not the
// workers: then the controller steps down one worker per window (cores left to the application) and searches again
// once the caller is I/O-bound.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace gpuio::detail {

// The worker (of `active`) that serves the `turn`-th extent of `device` (of `devices`), so that every worker gets
// the same share of the load whatever the count: device d owns the `active` slots d*active .. d*active+active-1 of
// a line of devices*active slots, taken in turn by its extents, and worker w serves slots w*devices ..
// w*devices+devices-1 (devices/active devices' worth each). Where the count divides the devices (or they it) a
// device keeps whole workers of its own, as before; otherwise a device is shared by at most ceil(active/devices)+1
// workers. The old rule (device % active) gave 8 devices on 6 workers 2 devices to two workers and 1 to four: the
// two set the rate (H100 sim N=8: W=6 3.38 M vs W=8 6.61 M IOPS), and the rate curve the controller climbs had
// bumps at every count that does not divide N.
inline uint32_t spread_worker(uint32_t device, uint32_t devices, uint32_t active, uint32_t turn) {
  const uint64_t slot = uint64_t{device} * active + turn % active;
  return static_cast<uint32_t>(slot / devices);
}

// Hill climbing over worker counts lo..hi with measured rates. First the ladder: the start count doubled up to hi
// and halved down to lo (log2 probes reach a distant best, and every region of a curve with bumps is seen); then it
// bisects the unmeasured gaps next to the best measured count until both its neighbours are measured (at most
// ~2 log2(hi) probes in all); then, before settling on choice() (the fewest workers whose measured rate is within
// `gain` of the best: cores left to the application), it measures the choice and the best count at least
// confirm_windows times each, so one noisy window does not pick the count. Settled, it compares each window with
// the settled rate (which follows slow changes) and searches again when drift_windows windows running are all more
// than `drift` off it on the same side (the workload changed: noise, and a lone stalled window, are not on one side
// four times running), or after forget_windows settled windows (a neighbour may have become better).
class RateClimb {
 public:
  RateClimb(uint32_t lo, uint32_t hi, uint32_t start, double gain);
  // One window's measured rate (blocks/s) while `at` workers were active. Returns the count to run next.
  uint32_t observe(uint32_t at, double rate);
  // Forget every measured rate and search again, starting from `from`.
  void restart(uint32_t from);
  bool settled() const { return settled_; }
  uint32_t choice() const;  // the fewest measured workers within gain of the best measured rate (start if none)
  double rate(uint32_t k) const { return k < rate_.size() ? rate_[k] : 0.0; }
  uint32_t windows() const { return windows_; }  // rated windows since the last (re)start
  uint32_t searches() const { return searches_; }

  static constexpr double drift = 0.25;        // a settled window this far off the settled rate drifts ...
  static constexpr int drift_windows = 4;       // ... and this many running, on the same side: search again
  static constexpr double follow = 0.1;         // a window within drift moves the settled rate this much its way
  static constexpr int forget_windows = 1024;   // settled this long (~1 min of 50 ms windows): search again
  static constexpr int average_max = 4;         // a count's rate is the mean of its last (up to) this many windows
  static constexpr uint32_t confirm_windows = 2;  // windows the choice and the best need before settling

 private:
  uint32_t next_probe() const;  // 0: every gap next to the best count is measured

  uint32_t lo_, hi_, start_;
  double gain_;
  std::vector<double> rate_;     // by count; 0: not measured
  std::vector<uint32_t> seen_;   // windows averaged into rate_
  bool settled_ = false;
  double settled_rate_ = 0;
  int drifting_ = 0, drift_side_ = 0, settled_windows_ = 0;
  uint32_t windows_ = 0, searches_ = 1;
};

class CoreController {
 public:
  // fixed: the user chose the worker count; active() never moves. start: the first active count (clamped).
  CoreController(uint32_t min_active, uint32_t max_active, bool fixed, uint32_t start = 0);
  uint32_t active() const { return active_.load(std::memory_order_relaxed); }
  uint64_t adjustments() const { return adjustments_.load(std::memory_order_relaxed); }
  // One finished batch: its I/O time, the compute gap before its submission (0 if batches overlapped), its size
  // in blocks, the time it finished (seconds on a monotonic clock) and the active count it was planned for
  // (0: unknown, taken as the current one). blocks = 0: no rate information (the I/O-vs-compute rule alone decides:
  // one more worker while I/O-bound, one fewer while compute-bound).
  void observe(double io_seconds, double compute_seconds, uint64_t blocks = 0, double now_seconds = 0,
               uint32_t planned_active = 0);
  // Blocks per second measured at each worker count (index = count; 0 where not measured), for stats and tests.
  std::vector<double> rates() const;
  bool settled() const;
  // "fixed 4", "searching (3 windows)", "settled at 6 of 8 (5.12 M blocks/s)": for stats().
  std::string state() const;

  static constexpr int window_batches = 8;      // unrated mode (no block counts): decisions once per 8 batches
  static constexpr int rated_batches_min = 3;   // a rated window holds at least this many batches planned for it
  static constexpr double rated_seconds_min = 0.02;  // ... and lasts at least this long while searching
  static constexpr double settled_seconds_min = 0.05;  // ... or this long once settled (less noise to read as drift)
  static constexpr double grow_ratio = 1.1;     // io > 1.1 x compute: I/O-bound (rates mean something)
  static constexpr double shrink_ratio = 0.5;   // io < 0.5 x compute -> one fewer
  static constexpr double rate_gain = 0.05;     // a count must be this much faster than fewer workers to be chosen

 private:
  void set_active(uint32_t next);

  uint32_t min_, max_;
  bool fixed_;
  std::atomic<uint32_t> active_;
  std::atomic<uint64_t> adjustments_{0};
  mutable std::mutex mu_;
  RateClimb climb_;
  double io_sum_ = 0, compute_sum_ = 0;
  uint64_t blocks_sum_ = 0;
  double window_start_ = -1;  // when the current rated window began (a batch's completion)
  int seen_ = 0, fresh_ = 0;  // batches in this window; of those, planned for the count in force
};

}  // namespace gpuio::detail
