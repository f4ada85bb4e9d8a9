// ZnG pieces: predictor and access-monitor transitions, trace text round trip and errors, determinism,
// and the mechanisms the report relies on (registers cut write redundancy, prefetch fills L2).
#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>

#include "gpuio/zng.hpp"

namespace gz = gpuio::zng;

TEST(SimZngPredictor, PrefetchesOnlyAboveTwelveAndSaturatesAtFifteen) {
  gz::Predictor p;
  const uint32_t pc = 0x77;
  uint64_t addr = 0;
  EXPECT_FALSE(p.observe(pc, addr, 4096));  // first sight: no decision scored
  EXPECT_EQ(p.decisions(), 0u);
  for (int i = 1; i <= 12; ++i) EXPECT_FALSE(p.observe(pc, addr += 128, 4096)) << i;
  EXPECT_EQ(p.counter(pc), 12);
  EXPECT_FALSE(p.predict(pc));                // 12 is not above the threshold
  p.observe(pc, addr += 128, 4096);
  EXPECT_EQ(p.counter(pc), 13);
  EXPECT_TRUE(p.predict(pc));
  for (int i = 0; i < 10; ++i) p.observe(pc, addr += 128, 4096);
  EXPECT_EQ(p.counter(pc), 15);              // 4-bit saturating
  EXPECT_EQ(p.counter(pc + gz::Predictor::kEntries), 15);  // 512 entries, indexed by pc mod 512
  p.observe(pc, addr + (1ull << 30), 4096);  // a far jump is irregular: counts down
  EXPECT_EQ(p.counter(pc), 14);
}

TEST(SimZngPredictor, AccuracyOnARegularStreamIsHigh) {
  gz::Predictor p;
  // 8 PCs streaming through their own arrays, interleaved: the regular pattern of dense kernels.
  for (uint64_t i = 0; i < 20000; ++i)
    for (uint32_t pc = 0; pc < 8; ++pc) p.observe(pc, (uint64_t{pc} << 32) + i * 128, 8192);
  EXPECT_GE(p.accuracy(), 0.85);
  gz::Predictor q;  // random addresses: it learns not to prefetch, and that is correct too
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 20000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    q.observe(5, (x % (1ull << 34)) & ~127ull, 8192);
  }
  EXPECT_FALSE(q.predict(5));
  EXPECT_GE(q.accuracy(), 0.85);
}

TEST(SimZngMonitor, WasteAboveThirtyPercentHalvesBelowFivePercentGrows) {
  gz::AccessMonitor m(4096, 256, 16384, 100);
  m.wasted(31);
  m.prefetched(100);  // waste 0.31 > 0.3
  EXPECT_EQ(m.prefetch_bytes(), 2048u);
  EXPECT_EQ(m.halvings(), 1u);
  m.wasted(30);
  m.prefetched(100);  // 0.30 is not above 0.3: unchanged
  EXPECT_EQ(m.prefetch_bytes(), 2048u);
  m.wasted(4);
  m.prefetched(100);  // 0.04 < 0.05: grow by 1 KiB
  EXPECT_EQ(m.prefetch_bytes(), 3072u);
  EXPECT_EQ(m.growths(), 1u);
  m.wasted(5);
  m.prefetched(100);  // 0.05: unchanged
  EXPECT_EQ(m.prefetch_bytes(), 3072u);
  for (int i = 0; i < 40; ++i) m.prefetched(100);  // no waste: grows up to the max, never past it
  EXPECT_EQ(m.prefetch_bytes(), 16384u);
  gz::AccessMonitor s(512, 256, 16384, 10);
  for (int i = 0; i < 5; ++i) s.wasted(10), s.prefetched(10);
  EXPECT_EQ(s.prefetch_bytes(), 256u);  // never below the minimum
  EXPECT_THROW(gz::AccessMonitor(100, 256, 16384, 10), std::invalid_argument);
}

TEST(SimZngTrace, RoundTripsAndNamesTheBadLine) {
  std::string path = ::testing::TempDir() + "/z.trace";
  auto t = gz::gen_vecadd(4096, 4);
  gz::write_trace(path, t);
  auto back = gz::parse_trace(path);
  ASSERT_EQ(back.size(), t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(back[i].addr, t[i].addr);
    EXPECT_EQ(back[i].pc, t[i].pc);
    EXPECT_EQ(back[i].write, t[i].write);
  }
  {
    std::ofstream f(path);
    f << "1 0 0x10 0x1000 128 r\n2 0 0x10 0x1080 128 x\n";
  }
  try {
    gz::parse_trace(path);
    FAIL();
  } catch (const std::invalid_argument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(":2:"), std::string::npos) << m;
    EXPECT_NE(m.find("'x'"), std::string::npos) << m;
  }
  EXPECT_THROW(gz::generate("fft", 1, 1), std::invalid_argument);
  EXPECT_THROW(gz::parse_platform("zng-turbo"), std::invalid_argument);
}

TEST(SimZng, SameTraceAndConfigGiveByteIdenticalResults) {
  auto t = gz::generate("bfs", 0.05, 7);
  EXPECT_EQ(t.size(), gz::generate("bfs", 0.05, 7).size());
  auto c = gz::platform_config(gz::Platform::zng);
  std::string a = gz::run(c, t).to_json();
  EXPECT_EQ(a, gz::run(c, t).to_json());
  EXPECT_NE(a, gz::run(c, gz::generate("bfs", 0.05, 8)).to_json());
}

TEST(SimZng, FlashRegistersCutWriteRedundancy) {
  auto t = gz::generate("vecadd", 0.1, 1);
  auto base = gz::run(gz::platform_config(gz::Platform::zng_base), t);
  auto wr = gz::run(gz::platform_config(gz::Platform::zng_wropt), t);
  EXPECT_DOUBLE_EQ(base.write_redundancy, 4096.0 / 128.0);  // every dirty line costs a page program
  EXPECT_LT(wr.write_redundancy, base.write_redundancy / 4);
  EXPECT_GT(wr.register_write_hits, 0u);
  EXPECT_EQ(base.written_back_bytes, wr.written_back_bytes);
}

TEST(SimZng, PrefetchTurnsMissesIntoHitsOnStreams) {
  auto t = gz::generate("vecadd", 0.1, 1);
  auto base = gz::run(gz::platform_config(gz::Platform::zng_base), t);
  auto rd = gz::run(gz::platform_config(gz::Platform::zng_rdopt), t);
  EXPECT_EQ(base.prefetches, 0u);
  EXPECT_GT(rd.prefetches, 0u);
  EXPECT_GT(rd.prefetch_used_lines, 0u);
  EXPECT_GT(rd.l2_hits, base.l2_hits);
  EXPECT_EQ(rd.accesses, base.accesses);
}

TEST(SimZngPredictor, UsedPrefetchesCountUpUnusedCountDown) {
  gz::Predictor p;
  const uint32_t pc = 0x50;
  for (int i = 0; i < 13; ++i) p.feedback(pc, true);
  EXPECT_EQ(p.counter(pc), 13);
  EXPECT_TRUE(p.predict(pc));
  for (int i = 0; i < 5; ++i) p.feedback(pc, true);
  EXPECT_EQ(p.counter(pc), 15);  // saturates
  p.feedback(pc, false);
  EXPECT_EQ(p.counter(pc), 14);
  for (int i = 0; i < 20; ++i) p.feedback(pc, false);
  EXPECT_EQ(p.counter(pc), 0);   // never below zero
  EXPECT_FALSE(p.predict(pc));
  EXPECT_EQ(p.prefetch_used(), 18u);
  EXPECT_EQ(p.prefetch_unused(), 21u);
  EXPECT_DOUBLE_EQ(p.prefetch_accuracy(), 18.0 / 39.0);
  EXPECT_EQ(p.decisions(), 0u);  // feedback is not a miss decision
}

TEST(SimZng, PrefetchAccuracyIsHighOnRegularKernelsAndGathersDoNotPrefetch) {
  // Scale 0.25: the streams outgrow L2. Regular kernels prefetch lines they use.
  for (const char* w : {"vecadd", "stencil", "gemm"}) {
    auto r = gz::run(gz::platform_config(gz::Platform::zng), gz::generate(w, 0.25, 1));
    EXPECT_GT(r.prefetches, 0u) << w;
    EXPECT_EQ(r.prefetch_used_lines + r.prefetch_wasted_lines, r.prefetched_lines) << w;
    EXPECT_GE(r.predictor_accuracy, 0.85) << w;
  }
  // Random gathers over 1 GiB from one load instruction: its counter never climbs, so it never prefetches.
  std::vector<gz::Access> g;
  uint64_t x = 88172645463325252ull;
  for (uint32_t i = 0; i < 20000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    g.push_back({i, i % 8, 0x60, (x % (1ull << 30)) & ~127ull, 128, false});
  }
  auto b = gz::run(gz::platform_config(gz::Platform::zng_rdopt), g);
  EXPECT_GT(b.l2_misses, 19000u);
  EXPECT_EQ(b.prefetches, 0u);
  EXPECT_GE(b.predictor_decision_accuracy, 0.99);
}

TEST(SimZng, HitOnALineStillBeingFilledWaitsForTheFill) {
  // Two warps load the same line at the same time: the second hits L2 but cannot finish before the flash read.
  std::vector<gz::Access> t = {{0, 0, 1, 0, 128, false}, {0, 1, 1, 0, 128, false}};
  auto r = gz::run(gz::platform_config(gz::Platform::zng_base), t);
  EXPECT_EQ(r.l2_hits, 1u);
  EXPECT_GE(r.runtime_ns, 3000u);  // one Z-NAND read
  auto c = gz::platform_config(gz::Platform::zng_base);
  std::vector<gz::Access> one = {{0, 0, 1, 0, 128, false}};
  EXPECT_EQ(r.runtime_ns, gz::run(c, one).runtime_ns);
}
