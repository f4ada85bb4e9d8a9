// The sim backend through the IoQueue interface: data round trip, errors as completions, queue-full,
// and pacing never completing earlier than the model says.
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

namespace {

using gpuio::test::drain;

gpuio::BackendOptions sim_opts(bool paced, const std::string& preset = "znand") {
  gpuio::BackendOptions o;
  o.kind = "sim";
  o.sim.preset = preset;
  o.sim.paced = paced;
  o.sim.device_bytes = 64ull << 20;
  return o;
}

}  // namespace

TEST(SimBackend, WritesThenReadsBackAcrossDevices) {
  auto be = gpuio::make_backend({"sim0", "sim1"}, sim_opts(false));
  ASSERT_EQ(be->device_count(), 2u);
  EXPECT_EQ(be->device(1).path, "sim1");
  EXPECT_EQ(be->device(0).bytes, 64ull << 20);
  EXPECT_NE(be->describe().find("preset=znand"), std::string::npos);
  auto q = be->create_queue(8, {});
  std::vector<char> w(2 * 8192), r(2 * 8192, 0x55);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<char>(i * 7 + 3);
  ASSERT_TRUE(q->prepare({1, w.data(), 4096 * 100, 8192, 0, gpuio::IoOp::write}));
  ASSERT_TRUE(q->prepare({2, w.data() + 8192, (1ull << 20) - 4096, 8192, 1, gpuio::IoOp::write}));  // spans a chunk
  ASSERT_EQ(q->submit(), 2);
  for (auto& c : drain(*q, 2)) EXPECT_EQ(c.res, 8192);
  ASSERT_TRUE(q->prepare({3, r.data(), 4096 * 100, 8192, 0, gpuio::IoOp::read}));
  ASSERT_TRUE(q->prepare({4, r.data() + 8192, (1ull << 20) - 4096, 8192, 1, gpuio::IoOp::read}));
  q->submit();
  drain(*q, 2);
  EXPECT_EQ(std::memcmp(r.data(), w.data(), r.size()), 0);
  // Never-written data reads as zeros; device 0's data did not leak into device 1.
  ASSERT_TRUE(q->prepare({5, r.data(), 4096 * 100, 4096, 1, gpuio::IoOp::read}));
  q->submit();
  EXPECT_EQ(drain(*q, 1)[0].res, 4096);
  EXPECT_EQ(std::vector<char>(r.begin(), r.begin() + 4096), std::vector<char>(4096, 0));
  EXPECT_EQ(q->inflight(), 0u);
}

TEST(SimBackend, BadRequestsCompleteWithErrno) {
  auto be = gpuio::make_backend({"sim0"}, sim_opts(false));
  auto q = be->create_queue(4, {});
  char buf[4096];
  q->prepare({1, buf, 64ull << 20, 4096, 0, gpuio::IoOp::read});  // past the end
  q->prepare({2, buf, 0, 4096, 3, gpuio::IoOp::read});            // no such device
  q->submit();
  auto c = drain(*q, 2);
  std::sort(c.begin(), c.end(), [](auto& a, auto& b) { return a.user_data < b.user_data; });
  EXPECT_EQ(c[0].res, -EINVAL);
  EXPECT_EQ(c[1].res, -ENODEV);
}

TEST(SimBackend, PrepareReportsFullQueue) {
  auto be = gpuio::make_backend({"sim0"}, sim_opts(false));
  auto q = be->create_queue(2, {});
  char buf[4096];
  EXPECT_TRUE(q->prepare({1, buf, 0, 4096, 0, gpuio::IoOp::read}));
  EXPECT_TRUE(q->prepare({2, buf, 4096, 4096, 0, gpuio::IoOp::read}));
  EXPECT_FALSE(q->prepare({3, buf, 8192, 4096, 0, gpuio::IoOp::read}));
  q->submit();
  drain(*q, 2);
  EXPECT_TRUE(q->prepare({3, buf, 8192, 4096, 0, gpuio::IoOp::read}));
}

TEST(SimBackend, PacedCompletionIsNeverEarlierThanTheModel) {
  auto o = sim_opts(true, "tlc");
  o.sim.write_buffer_pages = 0;  // writes wait for the 700 us TLC program
  auto be = gpuio::make_backend({"sim0"}, o);
  auto q = be->create_queue(4, {});
  std::vector<char> buf(4096, 1);
  using us = std::chrono::microseconds;
  auto t0 = std::chrono::steady_clock::now();
  q->prepare({1, buf.data(), 0, 4096, 0, gpuio::IoOp::write});
  q->submit();
  EXPECT_EQ(drain(*q, 1)[0].res, 4096);
  auto t1 = std::chrono::steady_clock::now();
  EXPECT_GE(std::chrono::duration_cast<us>(t1 - t0).count(), 700);
  q->prepare({2, buf.data(), 0, 4096, 0, gpuio::IoOp::read});
  q->submit();
  drain(*q, 1);
  EXPECT_GE(std::chrono::duration_cast<us>(std::chrono::steady_clock::now() - t1).count(), 60);  // tR
}

// Workers sharing devices (the engine's spread for counts that do not divide N): each of three queues on its own thread
// submits runs of reads over two devices that the other queues also use (a submission takes each device's lock once,
// passing over a device another queue holds), with a bad request in the middle of a run; every request completes with
// the data written before and the bad one with its errno.
TEST(SimBackend, QueuesSharingDevicesOnThreads) {
  auto be = gpuio::make_backend({"sim0", "sim1", "sim2"}, sim_opts(false));
  constexpr uint64_t kBlocks = 256;
  std::vector<char> w(3 * kBlocks * 4096);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<char>(i * 13 + i / 4096);
  {
    auto q = be->create_queue(64, {});
    for (uint16_t d = 0; d < 3; ++d) {
      for (uint64_t b = 0; b < kBlocks; b += 64) {
        for (uint64_t k = 0; k < 64; ++k)
          ASSERT_TRUE(q->prepare({k, w.data() + (d * kBlocks + b + k) * 4096, (b + k) * 4096, 4096, d, gpuio::IoOp::write}));
        q->submit();
        for (auto& c : drain(*q, 64)) ASSERT_EQ(c.res, 4096);
      }
    }
  }
  std::vector<int> bad(3, 0), wrong(3, 0);
  std::vector<std::thread> ts;
  for (uint32_t t = 0; t < 3; ++t) {
    ts.emplace_back([&, t] {
      auto q = be->create_queue(48, {});
      std::vector<char> r(48 * 4096);
      for (int round = 0; round < 200; ++round) {
        // 24 reads of device t, then 24 of device (t+1)%3 interleaved with them: two runs after sorting by device
        for (uint64_t k = 0; k < 48; ++k) {
          uint16_t d = static_cast<uint16_t>(k % 2 ? (t + 1) % 3 : t);
          uint64_t b = (round * 7 + k * 5) % kBlocks;
          uint64_t len = k == 17 ? 0 : 4096;  // a bad request (0 bytes) inside a run
          q->prepare({k | (uint64_t{d} << 8) | (b << 16), r.data() + k * 4096, b * 4096, static_cast<uint32_t>(len), d,
                      gpuio::IoOp::read});
        }
        q->submit();
        for (auto& c : drain(*q, 48)) {
          uint64_t k = c.user_data & 0xff, d = (c.user_data >> 8) & 0xff, b = c.user_data >> 16;
          if (k == 17) {
            bad[t] += c.res == -EINVAL;
            continue;
          }
          wrong[t] += c.res != 4096 || std::memcmp(r.data() + k * 4096, w.data() + (d * kBlocks + b) * 4096, 4096) != 0;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  for (uint32_t t = 0; t < 3; ++t) {
    EXPECT_EQ(wrong[t], 0) << "queue " << t;
    EXPECT_EQ(bad[t], 200) << "queue " << t;
  }
}

TEST(SimBackend, RejectsBadOptions) {
  auto o = sim_opts(false);
  o.sim.preset = "nope";
  EXPECT_THROW(gpuio::make_backend({"sim0"}, o), std::invalid_argument);
  o = sim_opts(false);
  o.sim.device_bytes = 1000;
  EXPECT_THROW(gpuio::make_backend({"sim0"}, o), std::invalid_argument);
  EXPECT_THROW(gpuio::make_backend({"a/b"}, sim_opts(false)), std::invalid_argument);
}

TEST(SimBackend, EnvironmentOverridesAreAppliedAndReported) {
  ::setenv("GPUIO_SIM", "preset=tlc,channels=2,paced=0", 1);
  auto be = gpuio::make_backend({"sim0"}, sim_opts(true));
  std::string d = be->describe();
  EXPECT_NE(d.find("preset=tlc"), std::string::npos) << d;
  EXPECT_NE(d.find("channels=2"), std::string::npos) << d;
  EXPECT_NE(d.find("paced=off"), std::string::npos) << d;
  ::setenv("GPUIO_SIM", "preset=tlc,speed=9", 1);
  try {
    gpuio::make_backend({"sim0"}, sim_opts(true));
    ADD_FAILURE() << "unknown key accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("speed"), std::string::npos);
  }
  ::unsetenv("GPUIO_SIM");
}
