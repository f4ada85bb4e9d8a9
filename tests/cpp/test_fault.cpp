// The fault backend driven from seeds: every injected fault surfaces as documented (gpuio/fault.hpp),
// no batch hangs (each case runs under a deadline), and a seed reproduces its outcome.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <set>

#include "gpuio/engine.hpp"
#include "test_util.hpp"

using namespace gpuio;
using namespace gpuio::test;
using namespace std::chrono_literals;

namespace {

EngineOptions faulty(const std::string& path, const FaultOptions& f, const char* inner = "uring") {
  EngineOptions o;
  o.paths = {path};
  o.backend.kind = std::string("fault:") + inner;
  o.backend.fault = f;
  o.workers = 1;
  o.io_timeout_ms = 20000;
  return o;
}

// Runs fn on another thread and fails the test if it does not finish in time (a hang).
template <typename Fn>
void within(std::chrono::seconds limit, Fn fn) {
  auto fut = std::async(std::launch::async, fn);
  ASSERT_EQ(fut.wait_for(limit), std::future_status::ready) << "hang: not done within " << limit.count() << " s";
  fut.get();
}

std::vector<int64_t> run_of(int64_t first, size_t n) {
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = first + static_cast<int64_t>(i);
  return v;
}

}  // namespace

TEST(Fault, EioNamesBlockDeviceOffsetAndErrno) {
  TempFile f("eio", 1 << 20, 2);
  FaultOptions fo;
  fo.eio_rate = 1.0;
  within(30s, [&] {
    auto e = Engine::create(faulty(f.path(), fo));
    std::vector<int64_t> blocks = {40, 7, 90};
    HostBuffer out(3 * 4096);
    try {
      e->read(blocks.data(), 3, out.ptr);
      ADD_FAILURE() << "expected EIO";
    } catch (const IoError& ex) {
      std::string m = ex.what();
      EXPECT_EQ(ex.error_code(), EIO);
      EXPECT_NE(m.find("block 40 (index 0"), std::string::npos) << m;  // the first failing block
      EXPECT_NE(m.find(f.path()), std::string::npos) << m;
      EXPECT_NE(m.find("offset 163840"), std::string::npos) << m;
      EXPECT_NE(m.find("EIO"), std::string::npos) << m;
    }
  });
}

TEST(Fault, ShortTransfersAreResubmittedNeverSilent) {
  TempFile f("short", 2 << 20, 3);
  FaultOptions fo;
  fo.short_rate = 1.0;
  for (const char* inner : {"uring", "posix"}) {
    within(30s, [&] {
      auto e = Engine::create(faulty(f.path(), fo, inner));
      auto blocks = run_of(100, 64);  // one 256 KiB request, cut short again and again
      HostBuffer out(64 * 4096);
      e->read(blocks.data(), blocks.size(), out.ptr);
      for (size_t i = 0; i < blocks.size(); ++i)
        for (int j = 0; j < 4096; j += 331) ASSERT_EQ(out.ptr[i * 4096 + j], pattern(3, blocks[i], j));
      EXPECT_GT(e->stats().short_transfers, 0u) << inner;
    });
  }
}

TEST(Fault, LatencyDelaysButSucceeds) {
  TempFile f("lat", 1 << 20, 4);
  FaultOptions fo;
  fo.latency_rate = 1.0;
  fo.latency_us = 3000;
  within(30s, [&] {
    auto e = Engine::create(faulty(f.path(), fo));
    int64_t b = 9;
    HostBuffer out(4096);
    auto t0 = std::chrono::steady_clock::now();
    e->read(&b, 1, out.ptr);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 3ms);
    EXPECT_EQ(out.ptr[17], pattern(4, 9, 17));
  });
}

TEST(Fault, TornWriteFailsAndLeavesPrefixNewSuffixOld) {
  TempFile f("torn", 1 << 20, 5);
  FaultOptions fo;
  fo.torn_write_rate = 1.0;
  fo.seed = 77;
  auto blocks = run_of(20, 8);  // one 32 KiB write
  HostBuffer src(8 * 4096);
  std::memset(src.ptr, 0xC3, 8 * 4096);
  within(30s, [&] {
    auto e = Engine::create(faulty(f.path(), fo));
    try {
      e->write(blocks.data(), blocks.size(), src.ptr);
      ADD_FAILURE() << "a torn write must fail";
    } catch (const IoError& ex) {
      EXPECT_EQ(ex.error_code(), EIO);
      EXPECT_NE(std::string(ex.what()).find("write failed at block"), std::string::npos) << ex.what();
    }
  });
  EngineOptions clean;
  clean.paths = {f.path()};
  auto e = Engine::create(clean);
  HostBuffer back(8 * 4096);
  e->read(blocks.data(), blocks.size(), back.ptr);
  size_t new_bytes = 0;
  while (new_bytes < 8 * 4096 && back.ptr[new_bytes] == 0xC3) ++new_bytes;
  EXPECT_GE(new_bytes, 512u) << "a non-empty prefix reached the device";
  EXPECT_LT(new_bytes, 8u * 4096) << "the rest did not";
  EXPECT_EQ(new_bytes % 512, 0u);
  for (size_t j = new_bytes; j < 8 * 4096; j += 509) {
    ASSERT_EQ(back.ptr[j], pattern(5, 20 + j / 4096, j % 4096)) << "old data after the torn prefix";
  }
}

TEST(Fault, DisappearingDeviceFailsEveryLaterRequestWithEnodev) {
  TempFile a("gone0", 1 << 20, 1), b("gone1", 1 << 20, 2);
  FaultOptions fo;
  fo.disappear_after = 3;
  fo.disappear_device = 1;
  within(30s, [&] {
    EngineOptions o = faulty(a.path(), fo);
    o.paths = {a.path(), b.path()};
    o.stripe_bytes = 4096;  // block i on device i % 2
    auto e = Engine::create(o);
    std::vector<int64_t> blocks = {0, 2, 4};  // device 0 only: 3 requests, fine
    HostBuffer out(16 * 4096);
    e->read(blocks.data(), 3, out.ptr);
    std::vector<int64_t> more = {0, 1, 2, 3};
    try {
      e->read(more.data(), 4, out.ptr);
      ADD_FAILURE() << "device 1 is gone";
    } catch (const IoError& ex) {
      EXPECT_EQ(ex.error_code(), ENODEV);
      EXPECT_NE(std::string(ex.what()).find("block 1 (index 1"), std::string::npos) << ex.what();
      EXPECT_NE(std::string(ex.what()).find(b.path()), std::string::npos);
    }
  });
}

TEST(Fault, SeededCampaignSurfacesEveryFaultAndReproduces) {
  TempFile f("campaign", 4 << 20, 8);
  std::set<int> outcomes;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    FaultOptions fo;
    fo.seed = seed;
    fo.eio_rate = 0.02;
    fo.short_rate = 0.3;
    fo.latency_rate = 0.2;
    fo.latency_us = 200;
    std::mt19937_64 rng(seed);
    std::vector<int64_t> blocks(96);
    for (auto& b : blocks) b = static_cast<int64_t>(rng() % 1024);
    std::string first_error;
    for (int rep = 0; rep < 2; ++rep) {  // the same seed twice: the same outcome
      within(30s, [&] {
        auto e = Engine::create(faulty(f.path(), fo));
        HostBuffer out(blocks.size() * 4096);
        std::string err;
        try {
          e->read(blocks.data(), blocks.size(), out.ptr);
          for (size_t i = 0; i < blocks.size(); ++i) ASSERT_EQ(out.ptr[i * 4096 + 1], pattern(8, blocks[i], 1));
        } catch (const IoError& ex) {
          ASSERT_EQ(ex.error_code(), EIO) << "seed " << seed << ": " << ex.what();
          err = ex.what();
        }
        if (rep == 0) first_error = err;
        else EXPECT_EQ(err, first_error) << "seed " << seed << " did not reproduce";
        outcomes.insert(err.empty() ? 0 : 1);
      });
    }
  }
  EXPECT_EQ(outcomes.size(), 2u) << "the campaign should see both clean and failed batches";
}

// A wait that times out says whether the device answered nothing (stalled?) or the engine was busy elsewhere.
TEST(Fault, TimeoutSaysTheDeviceAnsweredNothing) {
  TempFile f("stall", 1 << 20, 9);
  FaultOptions slow;
  slow.latency_rate = 1.0;
  slow.latency_us = 1500000;  // every request takes 1.5 s
  auto e = Engine::create(faulty(f.path(), slow));
  HostBuffer out(4096);
  int64_t block = 3;
  BatchHandle h = e->submit(IoOp::read, &block, 1, out.ptr);
  try {
    h.wait(100);
    FAIL() << "the wait did not time out";
  } catch (const IoError& err) {
    EXPECT_EQ(err.error_code(), ETIMEDOUT);
    std::string what = err.what();
    EXPECT_NE(what.find("1 of its extents pending"), std::string::npos) << what;
    EXPECT_NE(what.find("no device request completed meanwhile (device stalled?)"), std::string::npos) << what;
  }
  within(10s, [&] { h.wait(); });
}
