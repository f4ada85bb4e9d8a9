// CAM's dynamic core count, from measured rates. The engine starts `threads` workers (workers=0: at least CAM's
// ceil(N/2) for N devices, up to the CPUs the process may use: limits::auto_worker_threads) and the controller
// moves how many of them get work. CAM's N/4..N/2 rule only seeds the search: on the H100 the best
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

// Hill climbing over worker counts lo..hi with measured rates, in three phases.
// 1. Screen: the ladder (the start count doubled up to hi, halved down to lo: a distant best in log2 probes, and
//    every region of a curve with bumps seen), then bisection of the unmeasured gaps next to the best count, then a
//    second window of each count measured once (not far below the best). Until a count has 3 windows its rate is
//    the best of them (a cold or stalled window only ever reads low); from 3 on, the median.
// 2. Final: the contenders (up to contenders_max counts within `contend` of the best screened rate) measured in
//    alternating rounds (ascending, then descending, ...: a slow drift of the machine cancels), at least
//    final_rounds_min and at most final_rounds_max rounds, stopping early once every comparison is resolved (the
//    gap exceeds z standard errors of the medians). A count's rate is the median of its last samples_max windows: a
//    stalled or cold window (the first window of a search runs on a cold engine) moves no pick. If the final best has
//    an unmeasured neighbour, it is screened and the rounds continue with it.
// 3. choice(): the fewest workers whose median is within `gain` of the best median by more than the noise (cores
//    left to the application only where the data show it costs under `gain`); otherwise the count with the best
//    median: a larger count is preferred within noise only if it is not slower.
// Settled, it compares each window with the settled rate (which follows slow changes) and searches again when
// drift_windows windows running are all more than `drift` off it on the same side (the workload changed: noise, and a
// lone stalled window, are not on one side four times running), or after forget_windows settled windows.
// Why medians and resolved comparisons: a simpler search (the mean of up to 4 windows, confirmed twice, the fewest
// workers within 5 %) settled sim N=16 at 7 workers (grid 0.75 of W=8) and shm-uring N=4 at 7 (0.84) on the H100,
// misled by one low first window at 8 (docs/decisions/0002).
class RateClimb {
 public:
  RateClimb(uint32_t lo, uint32_t hi, uint32_t start, double gain);
  // One window's measured rate (blocks/s) while `at` workers were active. Returns the count to run next.
  uint32_t observe(uint32_t at, double rate);
  // Forget every measured rate and search again, starting from `from`.
  void restart(uint32_t from);
  bool settled() const { return settled_; }
  bool final_rounds() const { return final_ && !settled_; }  // comparing the contenders
  uint32_t choice() const;  // see above; start if nothing was measured
  double rate(uint32_t k) const;  // the median of k's windows, the best of them below 3 (0: not measured)
  uint32_t samples(uint32_t k) const { return k < samples_.size() ? static_cast<uint32_t>(samples_[k].size()) : 0; }
  uint32_t windows() const { return windows_; }  // rated windows since the last (re)start
  uint32_t searches() const { return searches_; }
  uint32_t rounds() const { return rounds_; }  // final rounds completed in this search

  static constexpr double drift = 0.25;        // a settled window this far off the settled rate drifts ...
  static constexpr int drift_windows = 4;       // ... and this many running, on the same side: search again
  static constexpr double follow = 0.1;         // a window within drift moves the settled rate this much its way
  static constexpr int forget_windows = 1024;   // settled this long (~1 min of 50 ms windows): search again
  static constexpr uint32_t samples_max = 9;    // a count's rate is the median of its last (up to) this many windows
  static constexpr double contend = 0.25;       // screened within this of the best: a contender in the final rounds
  static constexpr uint32_t contenders_max = 3;
  static constexpr uint32_t final_rounds_min = 3;  // rounds of the contenders before the choice may settle ...
  static constexpr uint32_t final_rounds_max = 8;  // ... and the most (the noise did not resolve: medians decide)
  static constexpr double resolve_z = 2.0;      // a gap of this many standard errors is resolved
  static constexpr double noise_floor = 0.01;   // the least relative noise a count's windows are taken to have
  static constexpr double rescreen_floor = 0.4;  // a count measured once at least this fraction of the best: again

 private:
  uint32_t screen_probe() const;  // 0: the ladder and the gaps next to the best are measured
  uint32_t best() const;          // the count with the highest median
  double stderr_rel(uint32_t k) const;  // relative standard error of k's median
  bool qualifies(uint32_t k, uint32_t b) const;  // k's median within gain of b's by more than the noise
  bool resolved() const;          // every contender's comparison with the best is beyond noise
  void plan_round();              // the next round's visits (contenders, alternating order)
  void settle();

  uint32_t lo_, hi_, start_;
  double gain_;
  std::vector<std::vector<double>> samples_;  // by count: its last windows' rates, oldest first
  std::vector<uint32_t> round_;  // visits left in this final round (back = next)
  std::vector<uint32_t> contenders_;  // the counts of the last round planned
  bool final_ = false;           // screening done: in the final rounds
  bool settled_ = false;
  double settled_rate_ = 0;
  int drifting_ = 0, drift_side_ = 0, settled_windows_ = 0;
  uint32_t windows_ = 0, searches_ = 1, rounds_ = 0;
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
  static constexpr double settled_seconds_min = 0.05;  // ... or this long in the final rounds and once settled (less
                                                       // noise: the contenders' medians, and drift)
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
