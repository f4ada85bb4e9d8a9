// Device arrays' page-cache algorithm on the CPU (HostArrayCache, the same code the GPU kernels use for set
// mapping and CLOCK): random and sequential reads equal the file, exact hit/miss counts for a sequential scan,
// a cache smaller than the working set, write-back on eviction and at flush, bad geometry named.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "gpuio/array_cache.hpp"
#include "test_util.hpp"

using namespace gpuio;
using namespace gpuio::test;

namespace {

EngineOptions opts(const std::string& path) {
  EngineOptions o;
  o.paths = {path};
  o.workers = 1;
  return o;
}

// Element e of the array (int32 from block 1 on) as the file holds it.
int32_t expected(uint64_t tag, uint64_t e) {
  const uint64_t byte = 4096 + e * 4;
  uint8_t b[4];
  for (int k = 0; k < 4; ++k) b[k] = pattern(tag, (byte + k) / 4096, (byte + k) % 4096);
  int32_t v;
  std::memcpy(&v, b, 4);
  return v;
}

CacheGeometry geo(uint64_t n, uint32_t sets, uint32_t ways, uint32_t page = 4096) {
  CacheGeometry g;
  g.n_elems = n;
  g.elem_bytes = 4;
  g.page_bytes = page;
  g.block_bytes = 4096;
  g.base_block = 1;
  g.sets = sets;
  g.ways = ways;
  return g;
}

}  // namespace

TEST(ArrayPolicy, ClockTakesEmptyWaysFirstThenSecondChance) {
  int64_t tags[4] = {7, -1, 9, 11};
  uint8_t ref[4] = {1, 0, 1, 0};
  uint32_t hand = 0;
  EXPECT_EQ(array_clock_victim(tags, ref, 4, &hand), 1u);  // the empty way
  tags[1] = 8;
  ref[1] = 1;
  // hand 0: way 0 referenced (cleared), way 1 referenced (cleared), way 2 referenced (cleared), way 3 not.
  EXPECT_EQ(array_clock_victim(tags, ref, 4, &hand), 3u);
  EXPECT_EQ(hand, 0u);
  EXPECT_EQ(ref[0] + ref[1] + ref[2], 0);
  EXPECT_EQ(array_clock_victim(tags, ref, 4, &hand), 0u);  // every bit now clear: the hand's way
  EXPECT_EQ(array_find_way(tags, 4, 9), 2);
  EXPECT_EQ(array_find_way(tags, 4, 10), -1);
}

TEST(ArrayCache, SequentialScanCountsOneMissingWarpPerPage) {
  const uint64_t n = 64 * 1024;  // 64 pages of 1024 int32
  TempFile f("array_seq", 4096 + n * 4, 21);
  auto eng = Engine::create(opts(f.path()));
  HostArrayCache c(*eng, geo(n, 4, 2));  // 8 pages: far smaller than the scan
  std::vector<int64_t> idx(n);
  for (uint64_t i = 0; i < n; ++i) idx[i] = static_cast<int64_t>(i);
  std::vector<int32_t> out(n);
  c.gather(idx.data(), n, out.data());
  for (uint64_t i = 0; i < n; i += 97) ASSERT_EQ(out[i], expected(21, i)) << "element " << i;
  ASSERT_EQ(out[n - 1], expected(21, n - 1));
  const ArrayCounters k = c.counters();
  EXPECT_EQ(k.misses, 64u * 32);  // the first warp of each page misses, its 31 followers hit
  EXPECT_EQ(k.hits, n - 64u * 32);
  EXPECT_EQ(k.page_reads, 64u);
  EXPECT_EQ(k.evictions, 64u - 8);
  EXPECT_EQ(k.requests, 64u);
  EXPECT_EQ(k.page_writes, 0u);
}

TEST(ArrayCache, RandomReadsMatchTheFileWithACacheSmallerThanTheWorkingSet) {
  const uint64_t n = 40000;  // 40 pages (the last one partial)
  TempFile f("array_rand", 4096 + 40 * 4096, 5);
  auto eng = Engine::create(opts(f.path()));
  for (uint32_t ways : {1u, 4u}) {
    HostArrayCache c(*eng, geo(n, 3, ways));
    std::mt19937_64 rng(ways);
    std::vector<int64_t> idx(2000);
    for (auto& i : idx) i = static_cast<int64_t>(rng() % n);
    std::vector<int32_t> out(idx.size());
    c.gather(idx.data(), idx.size(), out.data());
    for (size_t j = 0; j < idx.size(); ++j) ASSERT_EQ(out[j], expected(5, idx[j])) << "ways " << ways << " j " << j;
    const ArrayCounters k = c.counters();
    EXPECT_EQ(k.hits + k.misses, idx.size());
    EXPECT_GT(k.evictions, 0u);
    EXPECT_LE(k.page_reads, k.misses);
    // Resident pages sit in their own set only.
    const auto& t = c.tags();
    for (size_t s = 0; s < t.size(); ++s)
      if (t[s] >= 0) EXPECT_EQ(static_cast<uint64_t>(t[s]) % 3, s / ways);
  }
}

TEST(ArrayCache, WritesReachStorageOnEvictionAndFlush) {
  const uint64_t n = 16 * 1024;  // 16 pages
  TempFile f("array_write", 4096 + n * 4, 9);
  auto eng = Engine::create(opts(f.path()));
  {
    HostArrayCache c(*eng, geo(n, 2, 1));  // 2 pages cached
    std::vector<int64_t> idx;
    std::vector<int32_t> vals;
    for (uint64_t p = 0; p < 16; ++p) {
      idx.push_back(static_cast<int64_t>(p * 1024 + p));
      vals.push_back(static_cast<int32_t>(1000 + p));
    }
    c.scatter(idx.data(), idx.size(), vals.data());
    EXPECT_EQ(c.counters().page_writes, 14u);  // every page but the 2 still cached was evicted dirty
    // Reading back through the cache sees the writes (evicted ones come back from storage).
    std::vector<int32_t> out(idx.size());
    c.gather(idx.data(), idx.size(), out.data());
    EXPECT_EQ(out, vals);
    c.flush();
    EXPECT_EQ(c.counters().page_writes, 16u);
    c.flush();  // nothing dirty any more
    EXPECT_EQ(c.counters().page_writes, 16u);
  }
  HostArrayCache fresh(*eng, geo(n, 4, 4));
  std::vector<int64_t> idx = {0, 1, 1024 + 1, 15 * 1024 + 15, 15 * 1024 + 16};
  std::vector<int32_t> out(idx.size());
  fresh.gather(idx.data(), idx.size(), out.data());
  EXPECT_EQ(out[0], 1000);
  EXPECT_EQ(out[1], expected(9, 1));  // untouched neighbour kept
  EXPECT_EQ(out[2], 1001);
  EXPECT_EQ(out[3], 1015);
  EXPECT_EQ(out[4], expected(9, 15 * 1024 + 16));
}

TEST(ArrayCache, MultiBlockPagesAndBadInputNamed) {
  const uint64_t n = 8 * 2048;  // 8 pages of 8 KiB
  TempFile f("array_big", 4096 + n * 4, 3);
  auto eng = Engine::create(opts(f.path()));
  HostArrayCache c(*eng, geo(n, 2, 2, 8192));
  std::vector<int64_t> idx = {0, 2047, 2048, 16383, 5000};
  std::vector<int32_t> out(idx.size());
  c.gather(idx.data(), idx.size(), out.data());
  for (size_t j = 0; j < idx.size(); ++j) EXPECT_EQ(out[j], expected(3, idx[j]));
  std::vector<int64_t> bad = {3, static_cast<int64_t>(n)};
  EXPECT_THROW(c.gather(bad.data(), 2, out.data()), std::out_of_range);
  EXPECT_THROW(HostArrayCache(*eng, geo(n, 2, 2, 3000)), std::invalid_argument);
  EXPECT_THROW(HostArrayCache(*eng, geo(n, 0, 2)), std::invalid_argument);
  EXPECT_THROW(HostArrayCache(*eng, geo(n + 4096, 2, 2)), std::invalid_argument);  // past the store's end
  EXPECT_THROW(HostArrayCache(*eng, geo(n, 2, 2, 128 * 1024)), std::invalid_argument);  // > 16 blocks
}

TEST(ArrayCache, MissesBeyondRoundPagesWaitARound) {
  const uint64_t n = 32 * 1024;  // 32 pages
  TempFile f("array_round", 4096 + n * 4, 13);
  auto eng = Engine::create(opts(f.path()));
  CacheGeometry g = geo(n, 32, 1);
  g.round_pages = 3;
  HostArrayCache c(*eng, g);
  std::vector<int64_t> idx(32);
  for (uint64_t l = 0; l < 32; ++l) idx[l] = static_cast<int64_t>(l * 1024 + l);  // 32 distinct pages, 32 sets
  std::vector<int32_t> out(32);
  c.gather(idx.data(), 32, out.data());
  for (uint64_t l = 0; l < 32; ++l) ASSERT_EQ(out[l], expected(13, idx[l]));
  EXPECT_EQ(c.counters().requests, 11u);  // ceil(32 / 3) rounds, one request each
  EXPECT_EQ(c.counters().page_reads, 32u);
  g.round_pages = 0;
  EXPECT_THROW(HostArrayCache(*eng, g), std::invalid_argument);
}
