// Low-latency mode's idle rule (the one-block latency path): a worker that just finished a request keeps
// polling its inbox for limits::low_latency_idle_spin_us before it sleeps, so a GPU-initiated read's next
// request (which follows only after the done word, the block's copy and a new publish) finds it awake instead
// of paying a futex wake-up; without low-latency mode the short limits::worker_spin_us applies.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "gpuio/engine.hpp"
#include "gpuio/limits.hpp"
#include "test_util.hpp"

using namespace gpuio;
using namespace gpuio::test;

namespace {

// Reads one block `reads` times, each after a busy gap of gap_us from the previous read's completion (a busy
// wait: sleep_for may oversleep on a loaded box); returns how often the worker slept meanwhile. Checks the data.
uint64_t sleeps_across_gaps(const std::string& path, const char* low_latency, int reads, int gap_us) {
  EngineOptions o;
  o.paths = {path};
  o.backend.kind = "posix";
  o.workers = 1;
  o.low_latency = low_latency;
  auto e = Engine::create(o);
  HostBuffer out(4096);
  int64_t b = 3;
  e->submit(IoOp::read, &b, 1, out.ptr).wait();  // through a worker (read() would do it inline); the worker's first wake-up is not counted
  const uint64_t before = e->stats().worker_sleeps;
  for (int i = 0; i < reads; ++i) {
    auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(gap_us);
    while (std::chrono::steady_clock::now() < until) {
    }
    b = (i * 7) % 200;
    e->submit(IoOp::read, &b, 1, out.ptr).wait();
    for (int j = 0; j < 4096; j += 509) EXPECT_EQ(out.ptr[j], pattern(9, static_cast<uint64_t>(b), j)) << b;
  }
  return e->stats().worker_sleeps - before;
}

}  // namespace

TEST(EngineLatency, LowLatencyWorkerStaysAwakeAcrossShortGaps) {
  static_assert(limits::worker_spin_us < 60 && 60 * 2 < limits::low_latency_idle_spin_us,
                "the gap must fall between the two spin windows");
  TempFile f("lat", 1 << 20, 9);
  const int reads = 40, gap_us = 60;
  // off: every gap outlasts the 50 us spin, so the worker sleeps before (nearly) every read. on: a gap of 60 us
  // plus the read's return stays well inside 200 us. Timing on a shared 2-core box: a preempted worker spins
  // through its window unscheduled, so a loaded attempt is repeated (up to 20) and each mode is judged by its
  // best attempt (fewest sleeps on, most off); with the rule broken every attempt sees on ~ reads. (Judged on
  // the same attempt, 10 attempts failed under a concurrent pytest run on 2 cores: on = 22 of 40.)
  uint64_t on = ~uint64_t{0}, off = 0;
  for (int attempt = 0; attempt < 20; ++attempt) {
    on = std::min(on, sleeps_across_gaps(f.path(), "on", reads, gap_us));
    off = std::max(off, sleeps_across_gaps(f.path(), "off", reads, gap_us));
    if (on <= static_cast<uint64_t>(reads / 4) && off >= static_cast<uint64_t>(reads * 3 / 4)) break;
  }
  EXPECT_GE(off, static_cast<uint64_t>(reads * 3 / 4)) << "on=" << on;
  EXPECT_LE(on, static_cast<uint64_t>(reads / 4)) << "off=" << off;
}
