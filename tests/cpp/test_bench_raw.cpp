// The raw reference must move exactly the bytes it claims: reads of a patterned file complete, and a
// sequential write of every block leaves the file holding its fill byte (0xab) everywhere.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "raw.hpp"
#include "test_util.hpp"

using gpuio::bench::RawOptions;
using gpuio::bench::run_raw;

namespace {

constexpr uint64_t kFileBytes = 1 << 20;

RawOptions counted(const std::string& path, bool uring, bool write) {
  RawOptions o;
  o.path = path;
  o.block_bytes = 4096;
  o.queue_depth = 8;
  o.threads = 2;
  o.ops_max = kFileBytes / 4096 / 2;  // per thread: together they cover the file once
  o.uring = uring;
  o.sequential = true;
  o.write = write;
  return o;
}

std::vector<uint8_t> contents(const std::string& path) {
  std::vector<uint8_t> got(kFileBytes);
  int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::pread(fd, got.data(), got.size(), 0), static_cast<ssize_t>(got.size()));
  ::close(fd);
  return got;
}

}  // namespace

class RawBench : public ::testing::TestWithParam<bool> {};

TEST_P(RawBench, ReadCountsEveryRequest) {
  gpuio::test::TempFile f("raw_read", kFileBytes, 7);
  auto r = run_raw(counted(f.path(), GetParam(), false));
  EXPECT_EQ(r.ops, kFileBytes / 4096);
  EXPECT_EQ(r.bytes, kFileBytes);
  EXPECT_GT(r.seconds, 0.0);
  EXPECT_GE(r.cpu_seconds, 0.0);
}

TEST_P(RawBench, SequentialWriteCoversTheFile) {
  gpuio::test::TempFile f("raw_write", kFileBytes, 9);
  auto r = run_raw(counted(f.path(), GetParam(), true));
  EXPECT_EQ(r.bytes, kFileBytes);
  std::vector<uint8_t> got = contents(f.path());
  size_t wrong = 0;
  for (uint8_t b : got) wrong += b != 0xab;
  EXPECT_EQ(wrong, 0u);
}

// dest_bytes: the requests rotate through 8 MiB (lanes per slot) and still move exactly their bytes, every one
// of them from the filled buffer (a lane outside it would write other bytes).
TEST_P(RawBench, RotatedDestinationMovesTheSameBytes) {
  gpuio::test::TempFile f("raw_dest", kFileBytes, 5);
  RawOptions o = counted(f.path(), GetParam(), false);
  o.dest_bytes = 8 << 20;
  auto r = run_raw(o);
  EXPECT_EQ(r.ops, kFileBytes / 4096);
  o.write = true;
  r = run_raw(o);
  EXPECT_EQ(r.bytes, kFileBytes);
  size_t wrong = 0;
  for (uint8_t b : contents(f.path())) wrong += b != 0xab;
  EXPECT_EQ(wrong, 0u);
}

TEST_P(RawBench, TimedRandomRunStops) {
  gpuio::test::TempFile f("raw_timed", kFileBytes, 3);
  RawOptions o = counted(f.path(), GetParam(), false);
  o.ops_max = 0;
  o.sequential = false;
  o.seconds = 0.05;
  auto r = run_raw(o);
  EXPECT_GT(r.ops, 0u);
  EXPECT_EQ(r.bytes, r.ops * 4096);
  EXPECT_LT(r.seconds, 5.0);  // a bound on termination, not a performance target
}

TEST_P(RawBench, MissingFileNamesThePath) {
  RawOptions o = counted("/nonexistent/gpuio_raw", GetParam(), false);
  try {
    run_raw(o);
    FAIL() << "expected IoError";
  } catch (const gpuio::IoError& e) {
    EXPECT_EQ(e.error_code(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/gpuio_raw"), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(UringAndPsync, RawBench, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "uring" : "psync"; });
