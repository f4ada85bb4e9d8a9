// The plan reader's host part (gpuio/plan_reader.hpp): segments at odd offsets land in destinations at odd
// addresses, cold (O_DIRECT pieces, several in flight) and claimed resident after eviction (the rest by O_DIRECT);
// the file's partial last block by pread; a truncated file raises IoError naming the file and offset, after
// which the pool's ring is back (nothing in flight).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "gpuio/plan_reader.hpp"
#include "gpuio/status.hpp"
#include "test_util.hpp"

namespace gpuio {
namespace {

std::vector<uint8_t> contents(const std::string& path, uint64_t bytes) {
  std::vector<uint8_t> out(bytes);
  int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_EQ(::pread(fd, out.data(), bytes, 0), static_cast<ssize_t>(bytes));
  ::fsync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // the reads below start cold
  ::close(fd);
  return out;
}

void append_tail(const std::string& path, uint32_t n) {  // a partial last block
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
  std::vector<uint8_t> b(n, 0x5a);
  ASSERT_EQ(::write(fd, b.data(), n), static_cast<ssize_t>(n));
  ::close(fd);
}

TEST(PlanReader, OddSegmentsLandColdAndAfterEviction) {
  test::TempFile f("plan_odd", 6u << 20, 7);
  append_tail(f.path(), 777);
  const uint64_t size = (6u << 20) + 777;
  std::vector<uint8_t> file = contents(f.path(), size);
  for (uint32_t resident : {0u, 1u}) {
    std::vector<std::vector<uint8_t>> dst;
    std::vector<PlanSegment> seg;
    uint64_t at = 13;
    for (uint64_t len : {1ull, 4095ull, 300000ull, 2000000ull, 5ull, 1500000ull}) {
      dst.emplace_back(len + 3);
      seg.push_back({at, len, reinterpret_cast<uint64_t>(dst.back().data() + 3), resident});
      at += len + (len % 2 ? 4096 : 0);
    }
    dst.emplace_back(size - at);
    seg.push_back({at, size - at, reinterpret_cast<uint64_t>(dst.back().data()), resident});  // to the last byte
    PlanOptions o;
    o.piece_bytes = 256u << 10;
    o.pieces = 6;
    PlanStats st = read_plan(f.path(), size, seg.data(), seg.size(), o);
    for (size_t i = 0; i < seg.size(); ++i) {
      const uint8_t* d = reinterpret_cast<const uint8_t*>(seg[i].dst);
      ASSERT_EQ(std::memcmp(d, file.data() + seg[i].file_offset, seg[i].len), 0) << "segment " << i;
    }
    uint64_t want = 0;
    for (auto& s : seg) want += s.len;
    EXPECT_EQ(st.bytes, want);
    EXPECT_EQ(st.pagecache_bytes + st.direct_bytes + st.buffered_bytes, want);
    EXPECT_EQ(st.buffered_bytes, 777u);  // the partial last block, by pread
    EXPECT_TRUE(st.direct);
    EXPECT_GT(st.inflight_max, 1u);
    EXPECT_EQ(st.disk_read_bytes % 4096, 0u);
    contents(f.path(), size);  // evicted again for the next round
  }
  PinnedPoolStats p = pinned_pool_stats();
  EXPECT_GE(p.made_bytes, 2u << 20);
  EXPECT_EQ(p.free_bytes, p.made_bytes);  // every ring back in the pool
}

TEST(PlanReader, TruncatedFileRaisesNamingFileAndOffset) {
  test::TempFile f("plan_trunc", 4u << 20, 8);
  std::vector<uint8_t> dst(4u << 20);
  PlanSegment s{0, 4u << 20, reinterpret_cast<uint64_t>(dst.data()), 0};
  ASSERT_EQ(::truncate(f.path().c_str(), 1u << 20), 0);
  PlanOptions o;
  o.piece_bytes = 256u << 10;
  o.pieces = 4;
  try {
    read_plan(f.path(), 4u << 20, &s, 1, o);
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(f.path()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at byte"), std::string::npos) << e.what();
  }
  PinnedPoolStats p = pinned_pool_stats();
  EXPECT_EQ(p.free_bytes, p.made_bytes);
}

TEST(PlanReader, BadPlansRefusedByName) {
  test::TempFile f("plan_bad", 8192, 9);
  uint8_t b[16];
  PlanSegment two[2] = {{0, 10, reinterpret_cast<uint64_t>(b), 0}, {5, 5, reinterpret_cast<uint64_t>(b), 0}};
  EXPECT_THROW(read_plan(f.path(), 8192, two, 2, {}), std::invalid_argument);
  PlanSegment past{8000, 500, reinterpret_cast<uint64_t>(b), 0};
  EXPECT_THROW(read_plan(f.path(), 8192, &past, 1, {}), std::invalid_argument);
  PlanOptions o;
  o.piece_bytes = 1000;
  EXPECT_THROW(read_plan(f.path(), 8192, nullptr, 0, o), std::invalid_argument);
}

}  // namespace
}  // namespace gpuio
