// The core-count controller's decision logic on synthetic rate curves (no clock, no threads): RateClimb fed with the
// rate each worker count delivers, and CoreController fed with simulated batch completions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "engine/controller.hpp"

using gpuio::detail::CoreController;
using gpuio::detail::RateClimb;
using gpuio::detail::spread_worker;

namespace {

constexpr double kGain = CoreController::rate_gain;
// Windows a search may take: the screen (ladder + bisection, ~2 log2(8) + 2, each count again), then the final rounds.
constexpr int kScreenMax = 18;
constexpr int kSearchMax = kScreenMax + RateClimb::final_rounds_max * RateClimb::contenders_max;
// Without noise every comparison resolves after the fewest rounds ... unless two counts run equally fast.
constexpr int kQuietSearchMax = kScreenMax + RateClimb::final_rounds_min * RateClimb::contenders_max;

// Deterministic noise in [-amp, amp] (a 64-bit LCG), so a failing seed reproduces.
struct Noise {
  uint64_t s;
  double amp;
  double operator()() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return amp * (2.0 * static_cast<double>(s >> 11) / static_cast<double>(1ull << 53) - 1.0);
  }
};

struct Outcome {
  uint32_t chosen = 0;
  int windows = 0;  // windows until settled (-1: never)
  std::set<uint32_t> probed;
};

// Feeds the search windows (window(at): the rate measured with `at` workers) until it settles or max_windows pass.
template <typename Window>
Outcome climb_with(uint32_t lo, uint32_t hi, uint32_t start, int max_windows, Window window) {
  RateClimb c(lo, hi, start, kGain);
  Outcome o;
  uint32_t at = std::clamp(start, lo, hi);
  for (int w = 1; w <= max_windows; ++w) {
    EXPECT_GE(at, lo);
    EXPECT_LE(at, hi);
    o.probed.insert(at);
    at = c.observe(at, window(at));
    if (c.settled()) {
      o.windows = w;
      o.chosen = at;
      return o;
    }
  }
  o.windows = -1;
  o.chosen = at;
  return o;
}

// curve[k]: the rate with k workers (curve[0] unused), each window off by the noise.
Outcome climb(const std::vector<double>& curve, uint32_t lo, uint32_t hi, uint32_t start, Noise noise = {1, 0.0},
              int max_windows = 128) {
  return climb_with(lo, hi, start, max_windows, [&](uint32_t at) { return curve[at] * (1 + noise()); });
}

double best_of(const std::vector<double>& curve, uint32_t lo, uint32_t hi) {
  return *std::max_element(curve.begin() + lo, curve.begin() + hi + 1);
}

// Linear interpolation for counts the benchmark grid did not measure (5, 7): {W: rate} at W = 1,2,3,4,6,8.
std::vector<double> grid_curve(double w1, double w2, double w3, double w4, double w6, double w8) {
  return {0, w1, w2, w3, w4, (w4 + w6) / 2, w6, (w6 + w8) / 2, w8};
}

// A measured (or modelled) rate curve, M IOPS at W = 0..8 workers, for N devices.
struct CurveCase {
  const char* name;
  uint32_t devices;
  std::vector<double> curve;
};

}  // namespace

TEST(RateClimb, BestAtOneWorker) {
  std::vector<double> down = {0, 300, 250, 220, 200, 180, 160, 140, 120};
  for (uint32_t start : {1u, 4u, 8u}) {
    Outcome o = climb(down, 1, 8, start);
    EXPECT_EQ(o.chosen, 1u) << "start " << start;
    EXPECT_GT(o.windows, 0);
    EXPECT_LE(o.windows, kQuietSearchMax);
  }
}

TEST(RateClimb, BestInTheMiddle) {
  std::vector<double> peak4 = {0, 100, 190, 270, 330, 300, 280, 260, 240};
  Outcome o = climb(peak4, 1, 8, 1);
  EXPECT_EQ(o.chosen, 4u);
  EXPECT_LE(o.windows, kQuietSearchMax) << "ladder 1,2,4,8, the gaps next to 4, three rounds of 4,5,6";
  EXPECT_EQ(o.probed.count(7), 0u) << "no probe far from the best";
}

TEST(RateClimb, BestAtTheCeilingBeyondHalfTheDevices) {
  // CAM's start at ceil(N/2) = 2 for N = 4; the rate keeps growing to 8 workers (the H100's sim/paced devices).
  std::vector<double> up = {0, 100, 200, 300, 400, 500, 600, 700, 800};
  Outcome o = climb(up, 1, 8, 2);
  EXPECT_EQ(o.chosen, 8u);
  EXPECT_LE(o.windows, kQuietSearchMax);
}

TEST(RateClimb, FlatRatesTakeTheFewestWorkers) {
  std::vector<double> flat(9, 100.0);
  Outcome o = climb(flat, 1, 8, 4);
  EXPECT_EQ(o.chosen, 1u) << "equal rates: cores left to the application";
  std::vector<double> plateau = {0, 100, 190, 280, 290, 295, 296, 296, 296};
  EXPECT_EQ(climb(plateau, 1, 8, 1).chosen, 4u) << "4 (290) is within 5% of the best rate (296), 3 (280) is not";
}

TEST(RateClimb, ABumpBetweenLadderRungsIsFound) {
  // 4 devices: 6 workers beat 4 and 8 (null host on the H100: 12.45, 14.01, 12.99 M IOPS).
  std::vector<double> bump = grid_curve(11.273, 12.533, 11.494, 12.453, 14.013, 12.992);
  bump[5] = 12.5;
  bump[7] = 13.0;
  Outcome o = climb(bump, 1, 8, 2);
  EXPECT_EQ(o.chosen, 6u);
}

TEST(RateClimb, NoisyRatesStayWithinTenPercentOfTheBest) {
  std::vector<std::vector<double>> curves = {
      {0, 100, 190, 270, 330, 300, 280, 260, 240},
      {0, 300, 250, 220, 200, 180, 160, 140, 120},
      {0, 100, 200, 300, 400, 500, 600, 700, 800},
      std::vector<double>(9, 100.0),
  };
  for (size_t i = 0; i < curves.size(); ++i) {
    for (uint64_t seed = 1; seed <= 50; ++seed) {
      Outcome o = climb(curves[i], 1, 8, 2, Noise{seed, 0.04});
      ASSERT_GT(o.windows, 0) << "curve " << i << " seed " << seed;
      EXPECT_LE(o.windows, kSearchMax) << "ladder, bisection, the final rounds";
      EXPECT_GE(curves[i][o.chosen], 0.9 * best_of(curves[i], 1, 8)) << "curve " << i << " seed " << seed;
    }
  }
}

// The H100 run of 2026-11-23 (the ceiling suite at 137500f), host destination, M IOPS at W = 1,2,3,4,6,8: the
// controller then chose within ceil(N/4)..ceil(N/2) and reached 0.14-0.76 of the best. Start: ceil(N/2), ceiling 8.
TEST(RateClimb, MeasuredH100CurvesReachTheBestHandPickedCount) {
  std::vector<CurveCase> cases = {
      {"null N=1", 1, grid_curve(8.707, 10.543, 12.584, 14.189, 13.754, 12.745)},
      {"sim N=1", 1, grid_curve(1.586, 0.864, 0.820, 0.792, 0.787, 0.738)},
      {"sim N=4", 4, grid_curve(1.071, 1.993, 2.819, 4.458, 4.415, 3.746)},
      {"sim N=8", 8, grid_curve(1.030, 2.887, 4.026, 3.960, 4.233, 8.711)},
      {"paced N=4", 4, grid_curve(0.889, 1.601, 1.679, 2.977, 3.043, 2.662)},
      {"paced N=8", 8, grid_curve(0.883, 1.445, 2.204, 3.192, 3.306, 6.125)},
      {"paced N=12", 12, grid_curve(0.851, 1.696, 2.645, 3.533, 5.617, 5.677)},
      {"null N=12", 12, grid_curve(9.063, 12.081, 12.234, 11.827, 12.988, 14.481)},
  };
  for (const CurveCase& c : cases) {
    uint32_t start = std::min(8u, (c.devices + 1) / 2);
    Outcome o = climb(c.curve, 1, 8, start);
    ASSERT_GT(o.windows, 0) << c.name;
    EXPECT_LE(o.windows, kSearchMax) << c.name << " (counts within 1 % of each other do not resolve: all rounds)";
    EXPECT_GE(c.curve[o.chosen], 0.9 * best_of(c.curve, 1, 8)) << c.name << " chose " << o.chosen;
  }
}

TEST(RateClimb, SearchesAgainWhenTheRateDrifts) {
  std::vector<double> peak4 = {0, 100, 190, 270, 330, 300, 280, 260, 240};
  RateClimb c(1, 8, 1, kGain);
  uint32_t at = 1;
  for (int w = 0; w < 80 && !c.settled(); ++w) at = c.observe(at, peak4[at]);
  ASSERT_TRUE(c.settled());
  ASSERT_EQ(at, 4u);
  // The workload changed: now one worker is best (say another process took the cores).
  std::vector<double> down = {0, 150, 120, 100, 90, 80, 70, 60, 50};
  for (int w = 1; w < RateClimb::drift_windows; ++w) {
    at = c.observe(at, down[at]);
    EXPECT_TRUE(c.settled()) << w << " drifting window(s): noise";
    EXPECT_EQ(at, 4u);
  }
  for (int w = 0; w < 40 && (c.searches() < 2 || !c.settled()); ++w) at = c.observe(at, down[at]);
  EXPECT_EQ(c.searches(), 2u);
  EXPECT_TRUE(c.settled());
  EXPECT_EQ(at, 1u);
  // Steady rates while settled: no new search before forget_windows.
  for (int w = 0; w < RateClimb::forget_windows - 1; ++w) ASSERT_EQ(c.observe(at, down[at] * (w % 2 ? 1.1 : 0.9)), 1u);
  EXPECT_EQ(c.searches(), 2u);
}

TEST(RateClimb, IgnoresCountsOutsideItsBoundsAndEmptyWindows) {
  RateClimb c(2, 4, 3, kGain);
  EXPECT_EQ(c.observe(7, 100.0), 7u);
  EXPECT_EQ(c.observe(3, 0.0), 3u);
  EXPECT_EQ(c.windows(), 0u);
  EXPECT_EQ(c.observe(3, 100.0), 4u) << "the ladder climbs first";
}

// CoreController end to end with simulated batches: two batches of 1000 blocks in flight, each planned for the
// active count at its submission and finishing at that count's rate. Batches planned before a change are not rated.
TEST(CoreControllerRated, SettlesOnTheBestCountThroughStaleBatches) {
  auto run = [](const std::vector<double>& rate_of, uint32_t hi, uint32_t start, int batches, uint64_t* adjustments) {
    CoreController c(1, hi, false, start);
    double now = 0;
    uint32_t planned[2] = {c.active(), c.active()};
    for (int i = 0; i < batches; ++i) {
      uint32_t p = planned[i % 2];
      double dt = 1000.0 / rate_of[p];  // completions one per batch time at the planned count's rate
      now += dt;
      c.observe(2 * dt, 0.0, 1000, now, p);
      planned[i % 2] = c.active();  // the next batch in this slot is planned now
    }
    if (adjustments) *adjustments = c.adjustments();
    EXPECT_TRUE(c.settled()) << c.state();
    return c.active();
  };
  uint64_t adj = 0;
  EXPECT_EQ(run({0, 100, 190, 200, 195}, 4, 2, 400, &adj), 3u);  // 3 is > 5% better than 2, 4 is not better than 3
  EXPECT_LE(adj, static_cast<uint64_t>(kSearchMax)) << "settled: no wandering";
  EXPECT_EQ(run({0, 100, 190, 195, 196}, 4, 2, 400, nullptr), 2u) << "within 5%: fewer workers";
  EXPECT_EQ(run({0, 100, 200, 300, 400, 500, 600, 700, 800}, 8, 1, 400, nullptr), 8u) << "scaling rates: all";
  EXPECT_EQ(run({0, 300, 250, 200, 150}, 4, 2, 400, nullptr), 1u) << "oversubscribed cores: fewer is faster";
  // Convergence time: the screen (7 probes, each again) and three rounds of 3 contenders at ~(rated_batches_min + 1
  // stale) batches a window.
  EXPECT_EQ(run({0, 100, 190, 270, 330, 300, 280, 260, 240}, 8, 1, 4 * kQuietSearchMax, nullptr), 4u);
}

TEST(CoreControllerRated, ComputeBoundCallerGetsCoresBack) {
  CoreController c(1, 8, false, 6);
  double now = 0;
  for (int i = 0; i < 200; ++i) {
    now += 0.02;
    c.observe(0.002, 0.018, 1000, now, c.active());  // the caller computes 9x longer than it waits
  }
  EXPECT_EQ(c.active(), 1u);
  EXPECT_NE(c.state().find("searching"), std::string::npos) << c.state();
}

// Every worker count spreads the load evenly: over `active` turns of every device each worker gets exactly
// `devices` extents; a count that divides the devices (or that they divide) keeps each device on whole workers of its
// own (no sharing), and any count shares a device among at most ceil(active/devices)+1 workers.
TEST(SpreadWorker, EveryCountGetsAnEvenShare) {
  for (uint32_t n = 1; n <= 16; ++n) {
    for (uint32_t w = 1; w <= 16; ++w) {
      std::vector<uint32_t> load(w, 0);
      for (uint32_t d = 0; d < n; ++d) {
        std::set<uint32_t> serving;
        for (uint32_t t = 0; t < 3 * w; ++t) {  // three rounds: the turn wraps
          uint32_t k = spread_worker(d, n, w, t);
          ASSERT_LT(k, w) << "n " << n << " w " << w;
          ++load[k];
          serving.insert(k);
        }
        EXPECT_LE(serving.size(), (w + n - 1) / n + 1) << "n " << n << " w " << w << " d " << d;
        if (n % w == 0) EXPECT_EQ(serving.size(), 1u) << "n " << n << " w " << w << " d " << d;
        if (w % n == 0) EXPECT_EQ(serving.size(), w / n) << "n " << n << " w " << w << " d " << d;
      }
      for (uint32_t k = 0; k < w; ++k) EXPECT_EQ(load[k], 3 * n) << "n " << n << " w " << w << " worker " << k;
    }
  }
  // The case that ran at half rate: 8 devices on 6 workers was 2,2,1,1,1,1 devices a worker; now 8/6 each.
  std::vector<double> share(6, 0.0);
  for (uint32_t d = 0; d < 8; ++d)
    for (uint32_t t = 0; t < 6; ++t) share[spread_worker(d, 8, 6, t)] += 1.0 / 6;
  for (double x : share) EXPECT_NEAR(x, 8.0 / 6, 1e-9);
}

namespace {

// Settle on `curve` (no noise), then feed `windows` more windows from rate_at(window, count). Returns the climb.
template <class Rate>
RateClimb settled_then(const std::vector<double>& curve, uint32_t hi, uint32_t start, int windows, Rate rate_at,
                       uint32_t* at_out) {
  RateClimb c(1, hi, start, kGain);
  uint32_t at = start;
  for (int w = 0; w < 40 && !c.settled(); ++w) at = c.observe(at, curve[at]);
  EXPECT_TRUE(c.settled());
  for (int w = 0; w < windows; ++w) at = c.observe(at, rate_at(w, at));
  *at_out = at;
  return c;
}

}  // namespace

TEST(RateClimb, NoisyButSteadyRatesDoNotSearchAgain) {
  // Steady workload, noisy windows: +-20 % uniform, and every 7th window a stall at 0.4 x (a window that caught a
  // page-cache miss or a descheduled worker), and a slow 15 % rise over the run (the settled rate follows it).
  std::vector<double> curve = {0, 100, 190, 270, 330, 300, 280, 260, 240};
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Noise noise{seed, 0.2};
    const int n = RateClimb::forget_windows - 1;
    uint32_t at = 0;
    RateClimb c = settled_then(curve, 8, 2, n, [&](int w, uint32_t k) {
      double slow = 1 + 0.15 * w / n;
      return curve[k] * slow * (w % 7 == 3 ? 0.4 : 1 + noise());
    }, &at);
    EXPECT_EQ(c.searches(), 1u) << "seed " << seed << ": noise read as a workload change";
    EXPECT_TRUE(c.settled());
    EXPECT_EQ(at, 4u);
  }
}

TEST(RateClimb, AStepChangeSearchesAgainAndFindsTheNewBest) {
  std::vector<double> before = {0, 100, 190, 270, 330, 300, 280, 260, 240};
  // Down: the count's rate halves and fewer workers are now best (another process took the cores).
  std::vector<double> down = {0, 150, 140, 120, 110, 100, 90, 80, 70};
  // Up: the devices got faster and now scale to all workers.
  std::vector<double> up = {0, 200, 400, 600, 800, 1000, 1200, 1400, 1600};
  for (const auto* after : {&down, &up}) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      Noise noise{seed, 0.05};  // the noise the choice tests allow (a 10 % bar cannot tell 7 of 8 from 8 in +-10 %)
      uint32_t at = 0;
      const int changed_at = 50;
      RateClimb c = settled_then(before, 8, 2, 120, [&](int w, uint32_t k) {
        const std::vector<double>& cur = w < changed_at ? before : *after;
        return cur[k] * (1 + noise());
      }, &at);
      EXPECT_GE(c.searches(), 2u) << "seed " << seed << ": a real change must search again";
      EXPECT_TRUE(c.settled()) << "seed " << seed;
      EXPECT_GE((*after)[at], 0.9 * best_of(*after, 1, 8)) << "seed " << seed << " chose " << at;
    }
  }
  // Within drift_windows of the change it searches again (not only at forget_windows).
  RateClimb c(1, 8, 1, kGain);
  uint32_t at = 1;
  for (int w = 0; w < 40 && !c.settled(); ++w) at = c.observe(at, before[at]);
  ASSERT_TRUE(c.settled());
  for (int w = 0; w < RateClimb::drift_windows; ++w) at = c.observe(at, down[at]);
  EXPECT_EQ(c.searches(), 2u);
}

// Bumpy curves with the best at the top: the rate set by the busiest worker as the old device % workers rule made it
// (N / ceil(N / W) devices' worth) and the H100's measured grids with 5 and 7 taken from that model. With noise, the
// choice stays within 10 % of the best (the judged bar).
TEST(RateClimb, BumpyCurvesWithTheBestAtTheTop) {
  auto bumpy = [](uint32_t n, double per_worker) {
    std::vector<double> r(9, 0.0);
    for (uint32_t w = 1; w <= 8; ++w) r[w] = per_worker * n / ((n + w - 1) / w);
    return r;
  };
  std::vector<CurveCase> cases = {
      {"model N=8", 8, bumpy(8, 1.0)},
      {"model N=16", 16, bumpy(16, 1.0)},
      {"model N=12", 12, bumpy(12, 1.0)},
      // sim host, 588d636 (W = 1,2,3,4,5,6,7,8; 3, 5, 7 not measured: the busiest-worker model between neighbours)
      {"sim N=8", 8, {0, 0.908, 1.684, 2.3, 2.872, 3.1, 3.384, 3.4, 6.608}},
      {"sim N=16", 16, {0, 0.940, 1.398, 1.9, 2.396, 3.3, 4.343, 4.4, 6.546}},
      {"shm-uring N=8", 8, {0, 0.475, 0.751, 1.3, 1.929, 1.7, 1.670, 1.7, 3.351}},
      {"shm-uring N=16", 16, {0, 0.420, 0.866, 1.3, 1.791, 1.5, 1.435, 1.5, 3.273}},
  };
  for (const CurveCase& c : cases) {
    for (uint64_t seed = 1; seed <= 30; ++seed) {
      uint32_t start = std::min(8u, (c.devices + 1) / 2);
      Outcome o = climb(c.curve, 1, 8, start, Noise{seed, 0.05});
      ASSERT_GT(o.windows, 0) << c.name << " seed " << seed;
      EXPECT_GE(c.curve[o.chosen], 0.9 * best_of(c.curve, 1, 8))
          << c.name << " seed " << seed << " chose " << o.chosen;
    }
  }
}

// End to end on a steady workload whose batches take up to +-40 % of their mean time each (a shared machine):
// settled windows last settled_seconds_min (~16 batches of 3 ms here), so the noise averages out and the controller
// stays in its first search for thousands of batches. (At +-40 % a batch, 20 ms search windows may still take 3
// workers (270) for 4 (330) in one seed of ten: the choice is checked at +-20 %.)
TEST(CoreControllerRated, SteadyNoisyBatchesKeepTheFirstSearch) {
  const std::vector<double> rate_of = {0, 100e3, 190e3, 270e3, 330e3, 300e3, 280e3, 260e3, 240e3};
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const double amp = seed <= 10 ? 0.2 : 0.4;
    Noise noise{seed, amp};
    CoreController c(1, 8, false, 2);
    double now = 0;
    uint32_t planned[2] = {c.active(), c.active()};
    for (int i = 0; i < 4000; ++i) {
      uint32_t p = planned[i % 2];
      double dt = 1000.0 / rate_of[p] * (1 + noise());
      now += dt;
      c.observe(2 * dt, 0.0, 1000, now, p);
      planned[i % 2] = c.active();
    }
    EXPECT_TRUE(c.settled()) << c.state();
    if (amp < 0.3) EXPECT_EQ(c.active(), 4u) << "seed " << seed << ": " << c.state();
    EXPECT_NE(c.state().find("search 1)"), std::string::npos) << "seed " << seed << ": " << c.state();
  }
}

namespace {

// Windows as a busy machine delivers them: +-amp uniform noise, the first window of a search cold (0.6 x: a fresh
// engine's first batches), and every 9th window stalled (0.5 x: a descheduled worker).
struct BusyWindows {
  Noise noise;
  int window = 0;
  double operator()(double rate) {
    const int w = window++;
    return rate * (w == 0 ? 0.6 : w % 9 == 5 ? 0.5 : 1 + noise());
  }
};

Outcome climb_busy(const std::vector<double>& curve, uint32_t start, uint64_t seed, double amp) {
  BusyWindows busy{Noise{seed, amp}};
  return climb_with(1, 8, start, 128, [&](uint32_t at) { return busy(curve[at]); });
}

}  // namespace

// The controller's bar (within 10 % of the best worker count) on the grids of the H100 run at 672b55b (host,
// M IOPS at W = 1..8), where the old search (mean of up to 4 windows, the fewest within 5 %) chose 7 for sim N=16 (0.75 of W=8) and for shm-uring N=4 (0.84): fed
// busy-machine windows, the choice is within 10 % of the best count for every N and seed.
TEST(RateClimb, H100GridsAt672b55bWithBusyWindows) {
  std::vector<CurveCase> cases = {
      {"sim N=1", 1, {0, 0.89, 0.97, 0.87, 0.89, 0.80, 0.79, 0.78, 0.71}},
      {"sim N=4", 4, {0, 1.01, 1.67, 1.57, 3.27, 2.06, 2.40, 2.25, 3.03}},
      {"sim N=8", 8, {0, 0.95, 1.47, 1.85, 2.60, 2.55, 2.69, 2.69, 5.43}},
      {"sim N=12", 12, {0, 0.75, 1.54, 2.44, 3.17, 3.06, 4.29, 3.82, 5.07}},
      {"sim N=16", 16, {0, 0.79, 1.54, 2.18, 3.01, 3.44, 4.05, 4.45, 5.93}},
      {"shm-uring N=1", 1, {0, 0.50, 1.05, 1.49, 1.92, 2.47, 3.16, 3.59, 3.94}},
      {"shm-uring N=4", 4, {0, 0.47, 1.03, 1.43, 1.83, 2.37, 2.93, 3.25, 3.86}},
      {"shm-uring N=8", 8, {0, 0.47, 1.03, 1.35, 1.75, 2.46, 2.72, 3.16, 3.65}},
      {"shm-uring N=12", 12, {0, 0.59, 0.98, 1.50, 1.84, 2.11, 2.68, 3.16, 3.31}},
      {"shm-uring N=16", 16, {0, 0.41, 0.85, 1.35, 1.68, 2.13, 2.83, 3.44, 3.36}},
  };
  for (double amp : {0.05, 0.10}) {
    for (const CurveCase& c : cases) {
      for (uint64_t seed = 1; seed <= 40; ++seed) {
        const uint32_t start = std::min(8u, (c.devices + 1) / 2);
        Outcome o = climb_busy(c.curve, start, seed, amp);
        ASSERT_GT(o.windows, 0) << c.name << " seed " << seed;
        EXPECT_LE(o.windows, kSearchMax + 2) << c.name << " seed " << seed;
        EXPECT_GE(c.curve[o.chosen], 0.9 * best_of(c.curve, 1, 8))
            << c.name << " amp " << amp << " seed " << seed << " chose " << o.chosen;
      }
    }
  }
}

// Fewer workers are chosen only where the windows show they cost under the gain: a count 7 % slower than the best is
// not taken for cores left to the application (the old mean of windows took 4 here whenever 4's windows ran ~2 %
// high); at +-3 % windows the medians of 5 windows may still read it within 3 % now and then (1 seed in 50).
TEST(RateClimb, FewerWorkersOnlyWhereResolvedWithinTheGain) {
  const std::vector<double> curve = {0, 30, 55, 70, 93, 80, 85, 90, 100};
  int best = 0;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    Outcome o = climb(curve, 1, 8, 4, Noise{seed, 0.015});
    ASSERT_GT(o.windows, 0) << "seed " << seed;
    EXPECT_EQ(o.chosen, 8u) << "seed " << seed;
    Outcome n = climb(curve, 1, 8, 4, Noise{seed, 0.03});
    best += n.chosen == 8;
    EXPECT_GE(curve[n.chosen], 0.9 * 100) << "seed " << seed;
  }
  EXPECT_GE(best, 47) << "of 50 seeds at +-3 %";
  // 3 % slower with quiet windows: resolved within the gain, so the fewer workers.
  const std::vector<double> close = {0, 30, 55, 70, 97, 80, 85, 90, 100};
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Outcome o = climb(close, 1, 8, 4, Noise{seed, 0.005});
    EXPECT_EQ(o.chosen, 4u) << "seed " << seed;
  }
}

// The rate of a count is the median of its windows: one cold or stalled window does not move the pick.
TEST(RateClimb, MedianIgnoresALoneBadWindow) {
  RateClimb c(1, 8, 8, kGain);
  c.observe(8, 0.6 * 5.93);  // the first window of a fresh engine
  EXPECT_DOUBLE_EQ(c.rate(8), 0.6 * 5.93);
  c.observe(8, 5.93);
  c.observe(8, 5.90);
  EXPECT_DOUBLE_EQ(c.rate(8), 5.90);
  EXPECT_EQ(c.samples(8), 3u);
  for (uint32_t i = 0; i < 2 * RateClimb::samples_max; ++i) c.observe(8, 5.0);
  EXPECT_EQ(c.samples(8), RateClimb::samples_max) << "the last samples_max windows";
  EXPECT_DOUBLE_EQ(c.rate(8), 5.0);
}
