// Engine: layout mapping, integrity over 1 and 3 striped devices, direct and staged paths, small limits
// reaching queue-full and staging-exhausted, bad input touching nothing, the core-count controller.
#include <sched.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/controller.hpp"
#include "engine/layout.hpp"
#include "gpuio/crc32c.hpp"
#include "gpuio/engine.hpp"
#include "gpuio/gpu.hpp"
#include "test_util.hpp"

using namespace gpuio;
using namespace gpuio::test;

TEST(Layout, Raid0MapsStripesRoundRobin) {
  detail::Layout l({1 << 20, 1 << 20, 1 << 20}, 4096, 65536);  // 16 blocks per stripe
  EXPECT_EQ(l.total_blocks(), 3u * 256);
  EXPECT_EQ(l.map(0).device, 0u);
  EXPECT_EQ(l.map(15).offset, 15u * 4096);
  EXPECT_EQ(l.map(16).device, 1u);
  EXPECT_EQ(l.map(16).offset, 0u);
  EXPECT_EQ(l.map(48).device, 0u);
  EXPECT_EQ(l.map(48).offset, 65536u);
  EXPECT_EQ(l.contiguous_from(18), 14u);
  detail::Layout one({1 << 20}, 512, 65536);
  EXPECT_EQ(one.total_blocks(), 2048u);
  EXPECT_EQ(one.contiguous_from(10), 2038u);
  EXPECT_THROW(detail::Layout({1 << 20}, 4096, 6000), std::invalid_argument);
  EXPECT_THROW(detail::Layout({1000, 1 << 20}, 4096, 65536), std::invalid_argument);
}

static void check_roundtrip(Engine& e, uint64_t seed, size_t n, size_t misalign) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> blocks(n);
  std::uniform_int_distribution<int64_t> pick(0, static_cast<int64_t>(e.total_blocks()) - 1);
  // Distinct ids (a write batch with duplicates has no defined winner), with some runs of neighbours.
  std::vector<bool> used(e.total_blocks());
  for (size_t i = 0; i < n; ++i) {
    int64_t b = (i > 0 && rng() % 3 == 0 && blocks[i - 1] + 1 < static_cast<int64_t>(e.total_blocks()))
                    ? blocks[i - 1] + 1
                    : pick(rng);
    while (used[b]) b = (b + 1) % static_cast<int64_t>(e.total_blocks());
    used[b] = true;
    blocks[i] = b;
  }
  uint32_t bs = e.options().block_size;
  HostBuffer src(n * bs, misalign), dst(n * bs, misalign);
  for (size_t i = 0; i < n * bs; ++i) src.ptr[i] = static_cast<uint8_t>(rng());
  e.write(blocks.data(), n, src.ptr);
  std::memset(dst.ptr, 0xEE, n * bs);
  e.read(blocks.data(), n, dst.ptr);
  ASSERT_EQ(std::memcmp(src.ptr, dst.ptr, n * bs), 0) << "seed " << seed;
}

TEST(Engine, RoundTripOneAndThreeDevicesDirectAndStaged) {
  TempFile a("e1", 4 << 20, 1), b("e2", 4 << 20, 2), c("e3", 4 << 20, 3);
  for (auto paths : {std::vector<std::string>{a.path()}, std::vector<std::string>{a.path(), b.path(), c.path()}}) {
    for (const char* kind : {"uring", "posix"}) {
      EngineOptions o;
      o.paths = paths;
      o.backend.kind = kind;
      auto e = Engine::create(o);
      check_roundtrip(*e, 11, 700, 0);   // aligned: straight into the buffer
      check_roundtrip(*e, 12, 300, 64);  // unaligned: through staging
      auto s = e->stats();
      EXPECT_GT(s.bytes_direct, 0u);
      EXPECT_GT(s.bytes_staged, 0u);
      EXPECT_NE(s.data_path.find("staging"), std::string::npos);
      EXPECT_EQ(s.blocks, 2u * 700 + 2u * 300);
    }
  }
}

TEST(Engine, ReadsPreexistingDataInPlace) {
  TempFile a("p1", 1 << 20, 5), b("p2", 1 << 20, 6);
  EngineOptions o;
  o.paths = {a.path(), b.path()};
  o.stripe_bytes = 8192;  // two blocks per stripe unit
  auto e = Engine::create(o);
  std::vector<int64_t> blocks = {0, 1, 2, 3, 7, 100};
  HostBuffer out(blocks.size() * 4096);
  e->read(blocks.data(), blocks.size(), out.ptr);
  for (size_t i = 0; i < blocks.size(); ++i) {
    uint64_t stripe = blocks[i] / 2, dev = stripe % 2, dev_block = (stripe / 2) * 2 + blocks[i] % 2;
    for (int j = 0; j < 4096; j += 97) ASSERT_EQ(out.ptr[i * 4096 + j], pattern(5 + dev, dev_block, j)) << i;
  }
}

TEST(Engine, SmallLimitsReachQueueFullAndStagingExhausted) {
  TempFile f("small", 2 << 20, 9);
  for (const char* kind : {"uring", "posix"}) {
    auto e = Engine::create(small_limits({f.path()}, kind));
    std::vector<int64_t> blocks(64);
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int64_t>((i * 37) % 512);
    HostBuffer out(64 * 4096, 8);  // unaligned: every request needs one of the two staging slots
    e->read(blocks.data(), blocks.size(), out.ptr);
    for (size_t i = 0; i < blocks.size(); ++i) ASSERT_EQ(out.ptr[i * 4096 + 5], pattern(9, blocks[i], 5));
    auto s = e->stats();
    EXPECT_GT(s.staging_exhausted_events, 0u) << kind;
    HostBuffer aligned(64 * 4096);
    e->read(blocks.data(), blocks.size(), aligned.ptr);  // no staging: only the ring of 4 limits
    EXPECT_GT(e->stats().queue_full_events, 0u) << kind;
  }
}

TEST(Engine, BadInputIsNamedAndTouchesNothing) {
  TempFile f("bad", 1 << 20, 4);
  EngineOptions o;
  o.paths = {f.path()};
  auto e = Engine::create(o);
  std::vector<int64_t> blocks = {1, 2, 256};  // 256 blocks in the file: 256 is out of range
  HostBuffer out(3 * 4096);
  std::memset(out.ptr, 0x5A, 3 * 4096);
  try {
    e->read(blocks.data(), 3, out.ptr);
    FAIL();
  } catch (const std::out_of_range& ex) {
    EXPECT_NE(std::string(ex.what()).find("block 256 at index 2"), std::string::npos) << ex.what();
  }
  EXPECT_EQ(out.ptr[0], 0x5A) << "no block of a rejected batch may be read";
  blocks[2] = -1;
  EXPECT_THROW(e->read(blocks.data(), 3, out.ptr), std::out_of_range);
  EngineOptions bad = o;
  bad.block_size = 3000;
  EXPECT_THROW(Engine::create(bad), std::invalid_argument);
  bad = o;
  bad.queue_depth = 0;
  EXPECT_THROW(Engine::create(bad), std::invalid_argument);
  e->close();
  EXPECT_TRUE(e->closed());
  EXPECT_THROW(e->read(blocks.data(), 1, out.ptr), std::invalid_argument);
}

TEST(Engine, EmptyBatchCompletesAndSeqGrows) {
  TempFile f("empty", 64 << 10, 4);
  EngineOptions o;
  o.paths = {f.path()};
  auto e = Engine::create(o);
  auto h1 = e->submit(IoOp::read, nullptr, 0, nullptr);
  EXPECT_TRUE(h1.done());
  HostBuffer out(4096);
  int64_t b = 3;
  auto h2 = e->submit(IoOp::read, &b, 1, out.ptr);
  h2.wait();
  EXPECT_GT(h2.seq(), h1.seq());
}

TEST(Controller, WithoutRatesFollowsIoAgainstCompute) {
  detail::CoreController c(2, 4, false);  // no start given: the ceiling
  EXPECT_EQ(c.active(), 4u);
  for (int i = 0; i < 4 * detail::CoreController::window_batches; ++i) c.observe(0.001, 0.010);  // compute-bound
  EXPECT_EQ(c.active(), 2u) << "never below the floor";
  for (int i = 0; i < 4 * detail::CoreController::window_batches; ++i) c.observe(0.010, 0.001);  // I/O-bound
  EXPECT_EQ(c.active(), 4u) << "never above the ceiling";
  EXPECT_EQ(c.adjustments(), 4u);
  detail::CoreController fixed(3, 3, true);
  for (int i = 0; i < 32; ++i) fixed.observe(0.0, 1.0);
  EXPECT_EQ(fixed.active(), 3u);
  EXPECT_EQ(fixed.state(), "fixed 3");
}

TEST(Limits, AutoWorkerThreadsReachBeyondHalfTheDevices) {
  // The CPUs up to auto_workers_cap, or CAM's ceil(N/2) where more and the CPUs allow; the start is ceil(N/2).
  EXPECT_EQ(limits::auto_worker_threads(1, 16), limits::auto_workers_cap);
  EXPECT_EQ(limits::auto_worker_threads(1, 2), 2u);  // the 2-core CI box
  EXPECT_EQ(limits::auto_worker_threads(1, 1), 1u);
  EXPECT_EQ(limits::auto_worker_threads(12, 2), 2u) << "no more threads than CPUs";
  EXPECT_EQ(limits::auto_worker_threads(12, 16), 8u);
  EXPECT_EQ(limits::auto_worker_threads(40, 64), 20u);
  EXPECT_EQ(limits::auto_worker_threads(1000, 64), limits::workers_max);
  EXPECT_EQ(limits::auto_workers_start(1, 8), 1u);
  EXPECT_EQ(limits::auto_workers_start(12, 8), 6u);
  EXPECT_EQ(limits::auto_workers_start(12, 4), 4u);
}

TEST(Limits, TableWorkersFollowTheMachinesCpus) {
  // A table's engine workers (gpuio.TensorFile, through _core.table_defaults()): 2 on the 2-core CI box and
  // any machine below 16 CPUs, 4 from 16 on.
  EXPECT_EQ(limits::table_workers(1), 2u);
  EXPECT_EQ(limits::table_workers(2), 2u);
  EXPECT_EQ(limits::table_workers(15), 2u);
  EXPECT_EQ(limits::table_workers(16), 4u);
  EXPECT_EQ(limits::table_workers(128), 4u);
  EXPECT_EQ(limits::table_batch_blocks_max, 65536u);  // 256 MiB of 4 KiB blocks per request
}

TEST(Engine, DynamicWorkersStartAtHalfTheDevices) {
  std::vector<std::unique_ptr<TempFile>> files;
  std::vector<std::string> paths;
  for (int i = 0; i < 5; ++i) {
    files.push_back(std::make_unique<TempFile>("dyn" + std::to_string(i), 256 << 10, i));
    paths.push_back(files.back()->path());
  }
  EngineOptions o;
  o.paths = paths;
  auto e = Engine::create(o);
  auto s = e->stats();
  cpu_set_t set;
  uint32_t cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? static_cast<uint32_t>(CPU_COUNT(&set)) : 1;
  const uint32_t threads = limits::auto_worker_threads(5, cpus);  // ceil(5/2) = 3 where the CPUs allow
  EXPECT_EQ(s.workers, threads);
  EXPECT_EQ(s.active_workers, limits::auto_workers_start(5, threads));
  EXPECT_EQ(s.active_workers, std::min(3u, threads));
  check_roundtrip(*e, 5, 200, 0);
}

TEST(Engine, ExclusiveLockIsBoundedNeverAHang) {
  TempFile f("lock", 64 << 10, 1);
  EngineOptions o;
  o.paths = {f.path()};
  o.backend.lock = true;
  o.backend.lock_wait_ms = 50;
  auto first = Engine::create(o);
  try {
    Engine::create(o);
    FAIL() << "a second exclusive engine on the same device must be refused";
  } catch (const IoError& e) {
    EXPECT_EQ(e.error_code(), EWOULDBLOCK);
    EXPECT_NE(std::string(e.what()).find(f.path()), std::string::npos);
  }
  first.reset();
  o.backend.lock_wait_ms = 0;  // unlocked before close: the ring's teardown (asynchronous) holds the file, not the lock
  EXPECT_NO_THROW(Engine::create(o)) << "released when the holder closes";
}

TEST(Engine, CloseReleasesDevicesButKeepsStats) {
  TempFile f("close", 64 << 10, 1);
  EngineOptions o;
  o.paths = {f.path()};
  o.backend.lock = true;
  o.backend.lock_wait_ms = 50;
  auto e = Engine::create(o);
  HostBuffer out(4096);
  int64_t b = 2;
  e->read(&b, 1, out.ptr);
  e->close();
  o.backend.lock_wait_ms = 0;  // at once: the ring's teardown may still hold the file, but not its lock
  EXPECT_NO_THROW(Engine::create(o)) << "close() must drop the device lock, not the destructor";
  auto s = e->stats();
  EXPECT_EQ(s.blocks, 1u);
  EXPECT_NE(s.backend.find("uring"), std::string::npos);
  EXPECT_EQ(e->device(0).path, f.path());
  e->close();  // idempotent
}

TEST(Engine, SmallDirectRunsGoThroughStagingLargeOnesZeroCopy) {
  TempFile f("policy", 4 << 20, 6);
  for (uint32_t min_bytes : {16384u, 0u}) {
    EngineOptions o;
    o.paths = {f.path()};
    o.direct_min_bytes = min_bytes;
    auto e = Engine::create(o);
    std::vector<int64_t> isolated = {3, 50, 97, 400};  // four 4 KiB runs
    std::vector<int64_t> run;                           // one 256 KiB run
    for (int64_t b = 600; b < 664; ++b) run.push_back(b);
    HostBuffer a(isolated.size() * 4096), r(run.size() * 4096);
    e->read(isolated.data(), isolated.size(), a.ptr);
    e->read(run.data(), run.size(), r.ptr);
    for (size_t i = 0; i < isolated.size(); ++i) ASSERT_EQ(a.ptr[i * 4096 + 9], pattern(6, isolated[i], 9));
    for (size_t i = 0; i < run.size(); ++i) ASSERT_EQ(r.ptr[i * 4096 + 9], pattern(6, run[i], 9));
    auto s = e->stats();
    EXPECT_EQ(s.bytes_staged, min_bytes ? 4u * 4096 : 0u) << min_bytes;
    EXPECT_EQ(s.bytes_direct, min_bytes ? 64u * 4096 : 68u * 4096) << min_bytes;
  }
  EngineOptions bad;
  bad.paths = {f.path()};
  bad.direct_min_bytes = 1 << 20;  // larger than a staging slot
  EXPECT_THROW(Engine::create(bad), std::invalid_argument);
}

TEST(Crc32c, KnownVectorsAndContinuation) {
  const char* v = "123456789";
  EXPECT_EQ(crc32c(v, 9), 0xE3069283u);
  EXPECT_EQ(crc32c(v, 0), 0u);
  std::vector<uint8_t> big(3 * 8192 * 2 + 77);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 131 + (i >> 7));
  uint32_t whole = crc32c(big.data(), big.size());
  for (size_t k : {size_t(0), size_t(1), size_t(7), size_t(8192), size_t(3 * 8192 + 5)}) {
    EXPECT_EQ(crc32c(big.data() + k, big.size() - k, crc32c(big.data(), k)), whole) << k;
  }
}

TEST(EngineOptions, RangesNameTheOption) {
  try {
    check_option("queue_depth", -1);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "queue_depth=-1 must lie in [1, 4096]");
  }
  EXPECT_THROW(check_option("no_such_knob", 1), std::invalid_argument);
  EngineOptions o;
  o.paths = {"x"};
  EXPECT_NO_THROW(validate(o));
  o.direct_min_bytes = o.staging_slot_bytes + 4096;
  EXPECT_THROW(validate(o), std::invalid_argument);
}

// One table: validate() checks every knob through it (ranges and choices), and a file opened as a target gets the
// same defaults as an engine's first target.
TEST(EngineOptions, TheKnobTableIsTheCheck) {
  EngineOptions o;
  o.paths = {"x"};
  o.low_latency = "fast";
  try {
    validate(o);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "low_latency='fast' is not one of auto, on, off");
  }
  o.low_latency = "auto";
  o.backend.posix_threads = 0;
  EXPECT_THROW(validate(o), std::invalid_argument);
  for (const Knob<EngineOptions>& k : engine_knobs()) EXPECT_TRUE(*k.doc) << k.name;
  EXPECT_EQ(find_knob(engine_knobs(), "block_size", "engine").flags & knob_pow2, knob_pow2);
  TargetOptions t;
  EngineOptions e;
  EXPECT_EQ(t.stripe_bytes, e.stripe_bytes);
  EXPECT_EQ(t.open.direct, e.backend.direct);
  EXPECT_EQ(t.open.writable, e.backend.writable);
  EXPECT_EQ(t.open.lock, e.backend.lock);
  EXPECT_EQ(t.open.lock_wait_ms, e.backend.lock_wait_ms);
  GpuOptions g;
  EXPECT_NO_THROW(validate(g));
  g.copy = "fast";
  EXPECT_THROW(validate(g), std::invalid_argument);
  g.copy = "auto";
  g.stream_wait = "hostfn";
  EXPECT_THROW(validate(g), std::invalid_argument);
}

// Engine::read of one contiguous run is done on the calling thread (engine/inline_read.cpp): the bytes are the
// file's, from the device and from the page cache alike, and a read of several runs still goes to the workers.
TEST(Engine, ReadOfOneRunIsInlineAndMatchesTheFile) {
  TempFile f("inline", 256 << 10, 4);
  EngineOptions o;
  o.paths = {f.path()};
  o.workers = 1;
  auto e = Engine::create(o);
  HostBuffer out(4 * 4096);
  int64_t run[4] = {10, 11, 12, 13};
  for (int round = 0; round < 2; ++round) {  // the second: TempFile's buffered writes may have left it cached
    e->read(run, 4, out.ptr);
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 4096; j += 257) ASSERT_EQ(out.ptr[k * 4096 + j], pattern(4, 10 + k, j)) << k << " " << j;
  }
  EngineStats s = e->stats();
  EXPECT_EQ(s.inline_ops, 2u);
  EXPECT_EQ(s.batches, 0u);
  int64_t runs[3] = {1, 30, 2};
  e->read(runs, 3, out.ptr);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(out.ptr[k * 4096 + 100], pattern(4, static_cast<uint64_t>(runs[k]), 100));
  s = e->stats();
  EXPECT_EQ(s.inline_ops, 2u);
  EXPECT_EQ(s.batches, 1u);
  int64_t bad = 64;  // one past the end: refused before any read, as submit() refuses it
  EXPECT_THROW(e->read(&bad, 1, out.ptr), std::out_of_range);
}
