// The paced null device (sim backend, null_paced=1): a latency and a link rate per device, no model and no data on
// the host. The model's properties are asserted on its due times (LinkClock) and on the order completions come out;
// wall-clock checks are lower bounds only (a loaded 2-core box may run late, never early).
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "gpuio/io.hpp"
#include "queue_util.hpp"
#include "gpuio/sim.hpp"
#include "io/link_clock.hpp"

namespace {

using gpuio::test::drain;

using gpuio::detail::LinkClock;

gpuio::BackendOptions paced_null(uint64_t latency_ns = 0, uint32_t link_mb_s = 0) {
  gpuio::BackendOptions o;
  o.kind = "sim";
  o.sim.null_paced = true;
  o.sim.device_bytes = 64ull << 20;
  o.sim.latency_ns = latency_ns;
  o.sim.link_mb_s = link_mb_s;
  return o;
}

}  // namespace

TEST(LinkClock, IdleLatencyThenTheLinkRate) {
  LinkClock c(10000, 3200);  // 10 us, 3.2 GB/s: 1280 ns per 4 KiB
  const uint64_t s = c.xfer_ns(4096);
  EXPECT_EQ(s, 1280u);
  // A run of 5 reads arriving together on an idle device: the first after the latency, then one per link slot.
  uint64_t base = c.reserve(1000, 4096, 5 * 4096);
  for (uint64_t j = 1; j <= 5; ++j) EXPECT_EQ(base + c.xfer_ns(j * 4096), 1000 + 10000 + (j - 1) * s) << j;
  EXPECT_EQ(c.last_due_ns(), 1000 + 10000 + 4 * s);
  // Arriving while the device is busy: queued behind the previous completion, never before its own latency.
  base = c.reserve(2000, 4096, 4096);
  EXPECT_EQ(base + s, 1000 + 10000 + 5 * s);
  // After an idle gap the latency alone again.
  base = c.reserve(1000000, 4096, 4096);
  EXPECT_EQ(base + s, 1000000 + 10000u);
  // Sizes add up exactly over a run (8 KiB then 4 KiB: the second completes one 4 KiB slot after the first).
  base = c.reserve(2000000, 8192, 12288);
  EXPECT_EQ(base + c.xfer_ns(8192), 2000000 + 10000u);
  EXPECT_EQ(base + c.xfer_ns(12288), 2000000 + 10000 + c.xfer_ns(12288) - c.xfer_ns(8192));
}

// Queues on threads sharing one device: every run gets its own slots (no overlap, no gap while backlogged), and the
// device's last completion is the total work after the first latency.
TEST(LinkClock, RunsOfConcurrentQueuesNeverOverlap) {
  LinkClock c(5000, 1000);
  constexpr int kThreads = 4, kRuns = 2000, kRun = 8;
  const uint64_t s = c.xfer_ns(4096);
  std::vector<std::vector<uint64_t>> bases(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kRuns; ++i) bases[t].push_back(c.reserve(0, 4096, kRun * 4096));
    });
  for (auto& t : ts) t.join();
  std::vector<uint64_t> all;
  for (auto& b : bases) all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all.front() + s, 5000u);
  for (size_t i = 1; i < all.size(); ++i) ASSERT_EQ(all[i] - all[i - 1], kRun * s) << i;
  EXPECT_EQ(c.last_due_ns(), 5000 + (uint64_t{kThreads} * kRuns * kRun - 1) * s);
}

// Defaults come from the preset: the latency of one page read on the idle model, the rate of its host link.
TEST(SimPacedNull, DefaultsAreThePresetsAndReported) {
  auto be = gpuio::make_backend({"sim0"}, paced_null());
  gpuio::sim::SsdConfig cfg = gpuio::sim::preset("znand");
  const gpuio::sim::Timings& t = cfg.timings;
  const uint64_t page = cfg.geometry.page_bytes;
  uint64_t latency = t.controller_ns + t.read_ns + page * 1000 / t.channel_mb_s + page * 1000 / t.host_mb_s;
  std::string d = be->describe();
  EXPECT_NE(d.find("null=on(paced: latency_ns=" + std::to_string(latency) + " link_mb_s=" +
                   std::to_string(t.host_mb_s)), std::string::npos) << d;
}

TEST(SimPacedNull, NoCompletionBeforeItsLatencyAndNoDataProduced) {
  auto be = gpuio::make_backend({"sim0", "sim1"}, paced_null(300000, 3200));  // 300 us
  auto q = be->create_queue(8, {});
  std::vector<char> buf(2 * 4096, 0x5a);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(q->prepare({1, buf.data(), 4096, 4096, 0, gpuio::IoOp::read}));
  ASSERT_TRUE(q->prepare({2, buf.data() + 4096, 0, 4096, 7, gpuio::IoOp::read}));  // no device 7: fails at once
  ASSERT_EQ(q->submit(), 2);
  gpuio::IoCompletion c[1];
  ASSERT_EQ(q->reap(c, 1, 1), 1);  // the error first (due at once: the device's read is due 300 us later)
  EXPECT_EQ(c[0].user_data, 2u);
  EXPECT_EQ(c[0].res, -ENODEV);
  auto got = drain(*q, 1);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(got[0].res, 4096);
  EXPECT_GE(us, 300);
  EXPECT_GT(q->device_wait_ns(), 0u);  // reap() waited for the device, and said so
  EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](char x) { return x == 0x5a; }));  // no data produced
}

// One device serves a run at its link rate (lower bound in wall time); devices of one submission serve in parallel:
// completions come out in due order, the j-th read of every device before the (j+1)-th of any.
TEST(SimPacedNull, OneDevicesRateAndDevicesInParallel) {
  constexpr int kDevices = 4, kPer = 8;
  auto be = gpuio::make_backend({"sim0", "sim1", "sim2", "sim3"}, paced_null(1000, 41));  // ~100 us per 4 KiB
  auto q = be->create_queue(kDevices * kPer, {});
  std::vector<char> buf(4096);
  auto t0 = std::chrono::steady_clock::now();
  for (int j = 0; j < kPer; ++j)
    for (uint16_t d = 0; d < kDevices; ++d)
      ASSERT_TRUE(q->prepare({uint64_t(j) << 8 | d, buf.data(), uint64_t(j) * 4096, 4096, d, gpuio::IoOp::read}));
  q->submit();
  auto got = drain(*q, kDevices * kPer);
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t s = 4096ull * 1000 / 41;
  EXPECT_GE(uint64_t(ns), 1000 + (kPer - 1) * s);  // kPer reads on one device take at least its link time
  for (int i = 1; i < kDevices * kPer; ++i) {
    EXPECT_EQ(got[i].res, 4096);
    EXPECT_GE(got[i].user_data >> 8, got[i - 1].user_data >> 8) << i;
  }
}

TEST(SimPacedNull, BadOptionsNameTheValue) {
  // make_backend must refuse `o` with an invalid_argument whose text holds `needle`
  auto refused = [](const gpuio::BackendOptions& o, const char* needle, const char* what) {
    try {
      gpuio::make_backend({"sim0"}, o);
      ADD_FAILURE() << what << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto o = paced_null(5000, 0);
  o.sim.null_paced = false;  // the timing options of a device that does not use them
  o.sim.null = true;
  refused(o, "paced null device only", "latency_ns without null_paced=1");
  refused(paced_null(2000000000ull, 0), "latency_ns=2000000000", "latency_ns of 2 s");
  o = paced_null();
  o.sim.paced = false;
  refused(o, "paced=0", "null_paced=1 with paced=0");
  ::setenv("GPUIO_SIM", "latency_ns=-5", 1);
  refused(paced_null(), "latency_ns=-5", "negative latency_ns");
  ::setenv("GPUIO_SIM", "latency_ns=7000,link_mb_s=1600", 1);
  std::string d = gpuio::make_backend({"sim0"}, paced_null())->describe();
  ::unsetenv("GPUIO_SIM");
  EXPECT_NE(d.find("latency_ns=7000 link_mb_s=1600"), std::string::npos) << d;
}
