// The io interface contract, for every backend: prepare/submit/reap, queue-full instead of blocking,
// the reap budget, and correct data.
#include <gtest/gtest.h>

#include <cstring>

#include "gpuio/io.hpp"
#include "test_util.hpp"

using namespace gpuio;
using namespace gpuio::test;

class Backends : public ::testing::TestWithParam<const char*> {};

// The file under test as the backend's one device. For sim the device is named (sim devices are names, not
// paths) and the file, "<dir>/<name>.img", is its backing store: the emulated SSD serves the file's bytes.
std::unique_ptr<IoBackend> open_backend(const char* kind, const TempFile& f, uint64_t bytes) {
  BackendOptions o;
  o.kind = kind;
  std::string k = o.kind;
  if (k != "sim" && k != "fault:sim") return make_backend({f.path()}, o);
  const std::string& p = f.path();
  size_t slash = p.rfind('/');
  std::string name = p.substr(slash + 1);
  EXPECT_EQ(name.substr(name.size() - 4), ".img");
  o.sim.backing_dir = p.substr(0, slash);
  o.sim.device_bytes = bytes;
  return make_backend({name.substr(0, name.size() - 4)}, o);
}

TEST_P(Backends, ReadsKnownDataAndReportsQueueFull) {
  TempFile f("backend.img", 1 << 20, 7);
  auto be = open_backend(GetParam(), f, 1 << 20);
  ASSERT_EQ(be->device_count(), 1u);
  EXPECT_EQ(be->device(0).bytes, 1u << 20);
  HostBuffer buf(4 * 4096);
  auto q = be->create_queue(4, {{buf.ptr, 4 * 4096}});
  for (int i = 0; i < 4; ++i) {
    IoRequest r;
    r.user_data = 100 + i;
    r.buf = buf.ptr + i * 4096;
    r.offset = static_cast<uint64_t>(10 + i) * 4096;
    r.len = 4096;
    r.buf_index = 0;
    ASSERT_TRUE(q->prepare(r)) << i;
  }
  IoRequest extra;
  extra.buf = buf.ptr;
  extra.len = 4096;
  EXPECT_FALSE(q->prepare(extra)) << "a full queue must say so, not block";
  EXPECT_EQ(q->inflight(), 4u);
  ASSERT_EQ(q->submit(), 4);
  IoCompletion c[4];
  int got = 0;
  while (got < 4) {
    int n = q->reap(c + got, 1, 1);  // budget of one per call
    ASSERT_EQ(n, 1);
    got += n;
  }
  EXPECT_EQ(q->inflight(), 0u);
  bool seen[4] = {};
  for (auto& x : c) {
    ASSERT_EQ(x.res, 4096);
    ASSERT_GE(x.user_data, 100u);
    seen[x.user_data - 100] = true;
  }
  for (bool s : seen) EXPECT_TRUE(s);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4096; j += 511) ASSERT_EQ(buf.ptr[i * 4096 + j], pattern(7, 10 + i, j));
  EXPECT_EQ(q->reap(c, 4, 0), 0) << "nothing left: reap without waiting returns 0";
}

TEST_P(Backends, WriteThenReadBack) {
  TempFile f("backend_w.img", 1 << 20, 3);  // 1 MiB: the smallest sim device
  auto be = open_backend(GetParam(), f, 1 << 20);
  HostBuffer w(8192), r(8192);
  for (int j = 0; j < 8192; ++j) w.ptr[j] = static_cast<uint8_t>(j * 7 + 1);
  auto q = be->create_queue(2, {});
  IoRequest req;
  req.buf = w.ptr;
  req.len = 8192;
  req.offset = 16384;
  req.op = IoOp::write;
  ASSERT_TRUE(q->prepare(req));
  ASSERT_EQ(q->submit(), 1);
  IoCompletion c;
  ASSERT_EQ(q->reap(&c, 1, 1), 1);
  ASSERT_EQ(c.res, 8192);
  be->sync();
  req.buf = r.ptr;
  req.op = IoOp::read;
  ASSERT_TRUE(q->prepare(req));
  ASSERT_EQ(q->submit(), 1);
  ASSERT_EQ(q->reap(&c, 1, 1), 1);
  ASSERT_EQ(c.res, 8192);
  EXPECT_EQ(std::memcmp(w.ptr, r.ptr, 8192), 0);
}

INSTANTIATE_TEST_SUITE_P(All, Backends, ::testing::Values("uring", "posix", "fault:uring", "fault:posix", "sim",
                                                                "fault:sim"));

TEST(Backends, UnknownKindAndMissingPathAreNamed) {
  BackendOptions o;
  o.kind = "nvme-magic";
  try {
    make_backend({"/nonexistent"}, o);
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("nvme-magic"), std::string::npos);
  }
  o.kind = "uring";
  try {
    make_backend({"/nonexistent/dev"}, o);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_EQ(e.error_code(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dev"), std::string::npos);
  }
}

TEST(Backends, UringReportsWhatRuns) {
  TempFile f("describe", 64 << 10, 1);
  BackendOptions o;
  o.iopoll = true;  // file systems cannot poll: must be reported, not silently assumed
  auto be = make_backend({f.path()}, o);
  std::string d = be->describe();
  EXPECT_NE(d.find("iopoll="), std::string::npos);
  EXPECT_EQ(d.find("iopoll=off"), std::string::npos) << d;
}
