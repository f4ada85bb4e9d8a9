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

namespace {

constexpr double kGain = CoreController::rate_gain;

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

// curve[k]: the rate with k workers (curve[0] unused). Feeds windows until settled (or max_windows).
Outcome climb(const std::vector<double>& curve, uint32_t lo, uint32_t hi, uint32_t start, Noise noise = {1, 0.0},
              int max_windows = 64) {
  RateClimb c(lo, hi, start, kGain);
  Outcome o;
  uint32_t at = std::clamp(start, lo, hi);
  for (int w = 1; w <= max_windows; ++w) {
    EXPECT_GE(at, lo);
    EXPECT_LE(at, hi);
    o.probed.insert(at);
    at = c.observe(at, curve[at] * (1 + noise()));
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

double best_of(const std::vector<double>& curve, uint32_t lo, uint32_t hi) {
  return *std::max_element(curve.begin() + lo, curve.begin() + hi + 1);
}

// Linear interpolation for counts the benchmark grid did not measure (5, 7): {W: rate} at W = 1,2,3,4,6,8.
std::vector<double> grid_curve(double w1, double w2, double w3, double w4, double w6, double w8) {
  return {0, w1, w2, w3, w4, (w4 + w6) / 2, w6, (w6 + w8) / 2, w8};
}

}  // namespace

TEST(RateClimb, BestAtOneWorker) {
  std::vector<double> down = {0, 300, 250, 220, 200, 180, 160, 140, 120};
  for (uint32_t start : {1u, 4u, 8u}) {
    Outcome o = climb(down, 1, 8, start);
    EXPECT_EQ(o.chosen, 1u) << "start " << start;
    EXPECT_GT(o.windows, 0);
    EXPECT_LE(o.windows, 8);
  }
}

TEST(RateClimb, BestInTheMiddle) {
  std::vector<double> peak4 = {0, 100, 190, 270, 330, 300, 280, 260, 240};
  Outcome o = climb(peak4, 1, 8, 1);
  EXPECT_EQ(o.chosen, 4u);
  EXPECT_LE(o.windows, 8) << "ladder 1,2,4,8 then the gaps next to 4";
  EXPECT_EQ(o.probed.count(7), 0u) << "no probe far from the best";
}

TEST(RateClimb, BestAtTheCeilingBeyondHalfTheDevices) {
  // CAM's start at ceil(N/2) = 2 for N = 4; the rate keeps growing to 8 workers (the H100's sim/paced devices).
  std::vector<double> up = {0, 100, 200, 300, 400, 500, 600, 700, 800};
  Outcome o = climb(up, 1, 8, 2);
  EXPECT_EQ(o.chosen, 8u);
  EXPECT_LE(o.windows, 7);
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
      EXPECT_LE(o.windows, 10);
      EXPECT_GE(curves[i][o.chosen], 0.9 * best_of(curves[i], 1, 8)) << "curve " << i << " seed " << seed;
    }
  }
}

// The H100 run of 2026-11-23 (scripts/gpu-ceiling.sh at 137500f), host destination, M IOPS at W = 1,2,3,4,6,8: the
// controller then chose within ceil(N/4)..ceil(N/2) and reached 0.14-0.76 of the best. Start: ceil(N/2), ceiling 8.
TEST(RateClimb, MeasuredH100CurvesReachTheBestHandPickedCount) {
  struct Case {
    const char* name;
    uint32_t devices;
    std::vector<double> curve;
  };
  std::vector<Case> cases = {
      {"null N=1", 1, grid_curve(8.707, 10.543, 12.584, 14.189, 13.754, 12.745)},
      {"sim N=1", 1, grid_curve(1.586, 0.864, 0.820, 0.792, 0.787, 0.738)},
      {"sim N=4", 4, grid_curve(1.071, 1.993, 2.819, 4.458, 4.415, 3.746)},
      {"sim N=8", 8, grid_curve(1.030, 2.887, 4.026, 3.960, 4.233, 8.711)},
      {"paced N=4", 4, grid_curve(0.889, 1.601, 1.679, 2.977, 3.043, 2.662)},
      {"paced N=8", 8, grid_curve(0.883, 1.445, 2.204, 3.192, 3.306, 6.125)},
      {"paced N=12", 12, grid_curve(0.851, 1.696, 2.645, 3.533, 5.617, 5.677)},
      {"null N=12", 12, grid_curve(9.063, 12.081, 12.234, 11.827, 12.988, 14.481)},
  };
  for (const Case& c : cases) {
    uint32_t start = std::min(8u, (c.devices + 1) / 2);
    Outcome o = climb(c.curve, 1, 8, start);
    ASSERT_GT(o.windows, 0) << c.name;
    EXPECT_LE(o.windows, 10) << c.name;
    EXPECT_GE(c.curve[o.chosen], 0.9 * best_of(c.curve, 1, 8)) << c.name << " chose " << o.chosen;
  }
}

TEST(RateClimb, SearchesAgainWhenTheRateDrifts) {
  std::vector<double> peak4 = {0, 100, 190, 270, 330, 300, 280, 260, 240};
  RateClimb c(1, 8, 1, kGain);
  uint32_t at = 1;
  for (int w = 0; w < 20 && !c.settled(); ++w) at = c.observe(at, peak4[at]);
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
  EXPECT_EQ(run({0, 100, 190, 200, 195}, 4, 2, 200, &adj), 3u);  // 3 is > 5% better than 2, 4 is not better than 3
  EXPECT_LE(adj, 8u) << "settled: no wandering";
  EXPECT_EQ(run({0, 100, 190, 195, 196}, 4, 2, 200, nullptr), 2u) << "within 5%: fewer workers";
  EXPECT_EQ(run({0, 100, 200, 300, 400, 500, 600, 700, 800}, 8, 1, 200, nullptr), 8u) << "scaling rates: all";
  EXPECT_EQ(run({0, 300, 250, 200, 150}, 4, 2, 200, nullptr), 1u) << "oversubscribed cores: fewer is faster";
  // Convergence time: ladder + bisection at ~(rated_batches_min + 1 stale) batches a probe.
  EXPECT_EQ(run({0, 100, 190, 270, 330, 300, 280, 260, 240}, 8, 1, 40, nullptr), 4u);
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
