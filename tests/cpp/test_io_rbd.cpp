// The rbd backend. Name parsing and the build switch run everywhere; the I/O tests need a running Ceph
// cluster: GPUIO_TEST_CEPH_CONF=<its ceph.conf> (client.admin's keyring in it). Without one they skip
// (GTEST_SKIP); pytest's tests/python/volumes/test_volumes_cpp.py runs them against the session's cluster.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gpuio/engine.hpp"
#include "gpuio/io.hpp"
#include "test_util.hpp"

#ifdef GPUIO_HAVE_RBD
#include "io/rbd.hpp"
#endif

using namespace gpuio;

#ifndef GPUIO_HAVE_RBD
TEST(Rbd, NotBuiltSaysHow) {
  EXPECT_FALSE(rbd_built());
  BackendOptions o;
  o.kind = "rbd";
  try {
    make_backend({"rbd:p/v"}, o);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("librbd"), std::string::npos);
  }
}
#else
using rbd::Spec;

TEST(Rbd, BuiltAndItsPluginLoads) {
  EXPECT_TRUE(rbd_built());
  EXPECT_EQ(rbd::unavailable(), "");  // libgpuio_rbd.so.1 found through the binary's RUNPATH, Ceph's libraries there
}

// An IoError thrown inside libgpuio_rbd.so.1 is caught here by type, errno and text intact.
TEST(Rbd, PluginErrorsArriveAsIoError) {
  RbdOptions o;
  o.conf = "/nonexistent/gpuio-test/ceph.conf";
  o.timeout_s = 2;
  try {
    rbd::connect(o);
    FAIL() << "connected with a missing ceph.conf";
  } catch (const IoError& e) {
    EXPECT_EQ(e.error_code(), ENOENT);
    EXPECT_NE(std::string(e.what()).find(o.conf), std::string::npos) << e.what();
  }
}

TEST(Rbd, ParsesVolumeNames) {
  Spec a = Spec::parse("rbd:pool/img");
  EXPECT_EQ(a.pool, "pool");
  EXPECT_EQ(a.ns, "");
  EXPECT_EQ(a.image, "img");
  Spec b = Spec::parse("pool/team/img");
  EXPECT_EQ(b.ns, "team");
  EXPECT_EQ(b.str(), "rbd:pool/team/img");
  for (const char* bad : {"rbd:", "img", "a//b", "a/b/c/d", "rbd:p/i mg"}) {
    try {
      Spec::parse(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

namespace {

const char* cluster_conf() { return std::getenv("GPUIO_TEST_CEPH_CONF"); }

RbdOptions admin() {
  RbdOptions o;
  o.conf = cluster_conf();
  o.timeout_s = 15;
  return o;
}

// A fresh volume for one test, removed afterwards.
struct Volume {
  explicit Volume(const char* name, uint64_t bytes) : client(rbd::connect(admin())) {
    spec = Spec::parse("rbd/gtest-" + std::to_string(getpid()) + "-" + name);
    client->create(spec, bytes, 1 << 22);
  }
  ~Volume() {
    try {
      client->remove(spec);
    } catch (...) {
    }
  }
  std::unique_ptr<rbd::Client> client;
  Spec spec;
};

#define NEED_CLUSTER() \
  if (!cluster_conf()) GTEST_SKIP() << "no Ceph cluster: set GPUIO_TEST_CEPH_CONF (gpuio cluster up prints it)"

EngineOptions engine_on(const Spec& s, bool writable) {
  EngineOptions o;
  o.paths = {s.str()};
  o.backend.kind = "rbd";
  o.backend.writable = writable;
  o.backend.rbd = admin();
  o.workers = 2;
  return o;
}

}  // namespace

TEST(Rbd, EngineWritesAndReadsBackThroughAio) {
  NEED_CLUSTER();
  Volume v("rw", 2 << 20);
  auto eng = Engine::create(engine_on(v.spec, true));
  const size_t n = 512;
  ASSERT_EQ(eng->total_blocks(), n);
  std::vector<uint8_t> src(n * 4096), out(n * 4096);
  std::vector<int64_t> blocks(n), rev(n);
  for (size_t b = 0; b < n; ++b) {
    blocks[b] = static_cast<int64_t>(b);
    rev[b] = static_cast<int64_t>(n - 1 - b);
    for (size_t j = 0; j < 4096; ++j) src[b * 4096 + j] = test::pattern(3, b, j);
  }
  eng->write(blocks.data(), n, src.data());
  eng->sync();
  eng->read(rev.data(), n, out.data());  // reverse order: every block lands in its own slot
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(std::memcmp(out.data() + i * 4096, src.data() + (n - 1 - i) * 4096, 4096), 0) << "block " << i;
  }
  EngineStats s = eng->stats();
  EXPECT_EQ(s.data_path, "rbd+direct");
  EXPECT_EQ(s.bytes_staged, 0u);
  EXPECT_NE(s.backend.find("lock=exclusive"), std::string::npos) << s.backend;
  // host batches on rbd are issued by the caller and finished by librbd's thread: no worker saw them
  EXPECT_EQ(s.caller_submitted_ops, s.ops);
  EXPECT_EQ(s.bytes, 2 * n * 4096);
  EXPECT_EQ(s.block_waits, 0u);
}

TEST(Rbd, CallerSubmittedBatchesFromManyThreadsLandAndCloseWaitsForThem) {
  NEED_CLUSTER();
  Volume v("threads", 1 << 20);
  const size_t n = 256;
  std::vector<uint8_t> src(n * 4096);
  std::vector<int64_t> all(n);
  for (size_t b = 0; b < n; ++b) {
    all[b] = static_cast<int64_t>(b);
    for (size_t j = 0; j < 4096; ++j) src[b * 4096 + j] = test::pattern(5, b, j);
  }
  {
    auto w = Engine::create(engine_on(v.spec, true));
    w->write(all.data(), n, src.data());
  }
  auto eng = Engine::create(engine_on(v.spec, false));
  const int threads = 4, batches = 25, per = 8;
  std::vector<std::thread> ts;
  std::vector<int> bad(threads, 0);
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<uint8_t> out(per * 4096);
      std::vector<int64_t> ids(per);
      for (int b = 0; b < batches; ++b) {
        for (auto& id : ids) id = static_cast<int64_t>(rng() % n);
        eng->read(ids.data(), per, out.data());
        for (int i = 0; i < per; ++i) bad[t] += std::memcmp(out.data() + i * 4096, src.data() + ids[i] * 4096, 4096) != 0;
      }
    });
  }
  for (auto& t : ts) t.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
  EngineStats s = eng->stats();
  EXPECT_EQ(s.bytes, uint64_t{threads} * batches * per * 4096);
  EXPECT_EQ(s.caller_submitted_ops, s.ops);
  // close() with batches still in flight returns only after librbd finished every one of them
  std::vector<uint8_t> out(n * 4096, 0);
  std::vector<BatchHandle> hs;
  for (size_t b = 0; b < n; b += 32) hs.push_back(eng->submit(IoOp::read, all.data() + b, 32, out.data() + b * 4096));
  eng->close();
  for (auto& h : hs) {
    EXPECT_TRUE(h.done());
    h.wait();
  }
  EXPECT_EQ(std::memcmp(out.data(), src.data(), out.size()), 0);
}

// The caller-submitted path keeps at most queue_depth x workers requests with librbd; the rest of a batch (and of
// later batches) wait in the engine's FIFO and each completion issues the next: large batches land intact, the
// cap holds exactly, and close() waits for the queued ones too.
TEST(Rbd, CallerSubmittedRequestsStayWithinQueueDepthAndRefillPerCompletion) {
  NEED_CLUSTER();
  Volume v("depth", 1 << 20);
  const size_t n = 256;
  std::vector<uint8_t> src(n * 4096);
  std::vector<int64_t> all(n);
  for (size_t b = 0; b < n; ++b) {
    all[b] = static_cast<int64_t>(b);
    for (size_t j = 0; j < 4096; ++j) src[b * 4096 + j] = test::pattern(7, b, j);
  }
  {
    auto w = Engine::create(engine_on(v.spec, true));
    w->write(all.data(), n, src.data());
  }
  EngineOptions o = engine_on(v.spec, false);
  o.workers = 1;
  o.queue_depth = 4;
  o.io_bytes_max = 4096;  // one request per block
  const int batches = 3;
  std::vector<std::vector<int64_t>> ids(batches, all);
  for (int k = 0; k < batches; ++k) std::shuffle(ids[k].begin(), ids[k].end(), std::mt19937_64(k));
  for (bool close_early : {false, true}) {
    auto eng = Engine::create(o);
    std::vector<std::vector<uint8_t>> out(batches, std::vector<uint8_t>(n * 4096, 0));
    std::vector<BatchHandle> hs;
    for (int k = 0; k < batches; ++k) hs.push_back(eng->submit(IoOp::read, ids[k].data(), n, out[k].data()));
    if (close_early) {
      eng->close();  // 3 x 256 requests submitted, at most 4 with librbd: close() waits for all of them
      for (auto& h : hs) EXPECT_TRUE(h.done());
    }
    for (auto& h : hs) h.wait();
    for (int k = 0; k < batches; ++k) {
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::memcmp(out[k].data() + i * 4096, src.data() + ids[k][i] * 4096, 4096), 0)
            << "batch " << k << " slot " << i << " close_early " << close_early;
      }
    }
    EngineStats s = eng->stats();
    EXPECT_EQ(s.ops, uint64_t{batches} * n);
    EXPECT_EQ(s.caller_submitted_ops, s.ops);
    EXPECT_EQ(s.caller_inflight_max, 4u);
    EXPECT_EQ(s.caller_queued_ops, uint64_t{batches} * n - 4);  // all but the first 4 waited for a slot
  }
}

TEST(Rbd, QueueReportsFullAndReapsEveryCompletion) {
  NEED_CLUSTER();
  Volume v("queue", 1 << 20);
  BackendOptions o;
  o.kind = "rbd";
  o.writable = false;
  o.rbd = admin();
  auto be = make_backend({v.spec.str()}, o);
  EXPECT_TRUE(be->device(0).zero_copy);
  std::vector<uint8_t> buf(4 * 4096);
  auto q = be->create_queue(4, {});
  for (int i = 0; i < 4; ++i) {
    IoRequest r;
    r.user_data = 10 + i;
    r.buf = buf.data() + i * 4096;
    r.offset = i * 4096;
    r.len = 4096;
    ASSERT_TRUE(q->prepare(r));
  }
  IoRequest extra;
  extra.len = 4096;
  extra.buf = buf.data();
  EXPECT_FALSE(q->prepare(extra));
  EXPECT_EQ(q->submit(), 4);
  IoCompletion c[8];
  int got = 0;
  uint64_t seen = 0;
  while (got < 4) {
    int n = q->reap(c, 8, 1);
    ASSERT_GT(n, 0);
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(c[i].res, 4096);
      seen |= 1ull << (c[i].user_data - 10);
    }
    got += n;
  }
  EXPECT_EQ(seen, 0xFu);
  EXPECT_EQ(q->inflight(), 0u);
}

TEST(Rbd, ErrorsNameErrnoVolumeAndBlock) {
  NEED_CLUSTER();
  Volume v("ro", 1 << 20);
  auto eng = Engine::create(engine_on(v.spec, false));
  std::vector<uint8_t> buf(4096);
  int64_t block = 7;
  try {
    eng->write(&block, 1, buf.data());
    FAIL() << "a write through a read-only volume succeeded";
  } catch (const IoError& e) {
    EXPECT_EQ(e.error_code(), EROFS);
    std::string w = e.what();
    EXPECT_NE(w.find(v.spec.str()), std::string::npos) << w;
    EXPECT_NE(w.find("block 7"), std::string::npos) << w;
  }
  try {
    Engine::create(engine_on(Spec::parse("rbd/gtest-missing-volume"), false));
    FAIL() << "opened a missing volume";
  } catch (const IoError& e) {
    EXPECT_EQ(e.error_code(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("gtest-missing-volume"), std::string::npos) << e.what();
  }
}

TEST(Rbd, SecondWriterGetsEbusyAndBreakingFencesTheFirst) {
  NEED_CLUSTER();
  Volume v("lock", 1 << 20);
  auto first = Engine::create(engine_on(v.spec, true));
  EngineOptions o = engine_on(v.spec, true);
  try {
    Engine::create(o);
    FAIL() << "a second writer got the lock";
  } catch (const IoError& e) {
    EXPECT_EQ(e.error_code(), EBUSY);
  }
  o.backend.rbd.break_lock = true;
  auto second = Engine::create(o);  // breaks the first's lock: the first client is blocklisted
  std::vector<uint8_t> buf(4096, 0x5A);
  int64_t block = 3;
  second->write(&block, 1, buf.data());
  try {
    first->write(&block, 1, std::vector<uint8_t>(4096, 0x11).data());
    FAIL() << "the fenced writer's write was accepted";
  } catch (const IoError& e) {
    EXPECT_TRUE(e.error_code() == ESHUTDOWN || e.error_code() == EROFS) << e.what();
  }
  std::vector<uint8_t> out(4096);
  second->read(&block, 1, out.data());
  EXPECT_EQ(out, buf);
}
#endif
