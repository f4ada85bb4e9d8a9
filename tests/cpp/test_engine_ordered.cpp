// Batch-ordered staging of device-memory reads (engine/ordered.hpp, limits::ordered_*), on the CPU: a
// DeviceMover that copies host memory to host memory on its own thread, tickets completing later and out of
// phase with the workers' passes (like CUDA events), stands in for the GPU. Device reads of random, sequential
// and repeated block ids over several devices and workers must match pread of the files; a failing block is
// named while the others land; a batch the area cannot hold falls back to slots and is still right; batches
// from several threads at once share the area without one reading another's region.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "engine/layout.hpp"
#include "gpuio/engine.hpp"
#include "test_util.hpp"

using namespace gpuio;
using namespace gpuio::test;

namespace {

constexpr uint32_t kBlock = 4096;
constexpr uint64_t kDeviceBytes = 4ull << 20;  // 1024 blocks per device

// Host "device memory": copies run on a thread of their own, each group after a random delay (0-300 us), so
// a ticket completes whenever the thread gets to it, not when the worker polls. Tickets of one worker complete
// in order (one FIFO); fail_after_groups > 0 makes every group from then on fail (-EIO), like a lost GPU.
class HostMover final : public DeviceMover {
 public:
  explicit HostMover(int64_t fail_after_groups = -1, uint32_t delay_min_us = 0)
      : fail_after_(fail_after_groups), delay_min_us_(delay_min_us) {
    thread_ = std::thread([this] { run(); });
  }
  ~HostMover() override {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void stage_out(uint32_t worker, void* dst, const void* staging, uint32_t len) override {
    w(worker).queued.push_back({dst, staging, len});
    copies_.fetch_add(1);
    bytes_.fetch_add(len);
  }
  uint64_t flush(uint32_t worker) override {
    PerWorker& p = w(worker);
    uint64_t ticket = ++p.flushed;
    Group grp{worker, ticket, std::move(p.queued), std::chrono::steady_clock::now() +
                                                       std::chrono::microseconds(delay_min_us_ + delay_(rng_) % 300)};
    p.queued.clear();
    {
      std::lock_guard<std::mutex> g(mu_);
      work_.push_back(std::move(grp));
    }
    cv_.notify_all();
    return ticket;
  }
  int poll(uint32_t worker, uint64_t ticket) override {
    PerWorker& p = w(worker);
    if (p.failed_from.load(std::memory_order_acquire) != 0 && ticket >= p.failed_from.load()) {
      return p.completed.load(std::memory_order_acquire) >= ticket ? -EIO : 0;
    }
    return p.completed.load(std::memory_order_acquire) >= ticket ? 1 : 0;
  }
  int stage_in(uint32_t, void* staging, const void* src, uint32_t len) override {
    std::memcpy(staging, src, len);
    return 0;
  }
  uint64_t copies() const { return copies_.load(); }
  uint64_t bytes() const { return bytes_.load(); }

 private:
  struct Copy {
    void* dst;
    const void* src;
    uint32_t len;
  };
  struct Group {
    uint32_t worker;
    uint64_t ticket;
    std::vector<Copy> copies;
    std::chrono::steady_clock::time_point due;
  };
  struct PerWorker {
    std::vector<Copy> queued;  // the worker's thread only
    uint64_t flushed = 0;
    std::atomic<uint64_t> completed{0};
    std::atomic<uint64_t> failed_from{0};
  };
  PerWorker& w(uint32_t worker) {
    std::lock_guard<std::mutex> g(mu_);
    auto& slot = workers_[worker];
    if (!slot) slot = std::make_unique<PerWorker>();
    return *slot;
  }
  void run() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !work_.empty(); });
      if (work_.empty()) return;
      Group g = std::move(work_.front());
      work_.pop_front();
      PerWorker& p = *workers_[g.worker];
      lk.unlock();
      std::this_thread::sleep_until(g.due);
      bool fail = fail_after_ >= 0 && groups_done_++ >= fail_after_;
      if (fail) {
        uint64_t none = 0;
        p.failed_from.compare_exchange_strong(none, g.ticket);
      } else {
        for (const Copy& c : g.copies) std::memcpy(c.dst, c.src, c.len);
      }
      p.completed.store(g.ticket, std::memory_order_release);
      lk.lock();
    }
  }

  int64_t fail_after_;
  uint32_t delay_min_us_;
  int64_t groups_done_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Group> work_;
  std::unique_ptr<PerWorker> workers_[limits::workers_max];
  bool stop_ = false;
  std::thread thread_;
  std::mt19937 rng_{7};
  std::uniform_int_distribution<uint32_t> delay_{0, 1u << 30};
  std::atomic<uint64_t> copies_{0}, bytes_{0};
};

struct Devices {
  std::vector<std::unique_ptr<TempFile>> files;
  std::vector<std::string> paths;
  explicit Devices(int n, const std::string& name) {
    for (int i = 0; i < n; ++i) {
      files.push_back(std::make_unique<TempFile>(name + std::to_string(i), kDeviceBytes, 100 + i));
      paths.push_back(files.back()->path());
    }
  }
};

EngineOptions options(const Devices& d, uint32_t workers, const std::string& backend = "uring") {
  EngineOptions o;
  o.paths = d.paths;
  o.backend.kind = backend;
  o.workers = workers;
  o.queue_depth = 32;
  o.stripe_bytes = 16384;  // 4 blocks per stripe: a batch touches every device, runs split often
  o.io_timeout_ms = 20000;
  return o;
}

// What block b holds, by pread of the device the layout maps it to.
std::vector<uint8_t> expected(const Devices& d, const std::vector<int64_t>& blocks, uint64_t stripe) {
  detail::Layout layout(std::vector<uint64_t>(d.paths.size(), kDeviceBytes), kBlock, stripe);
  std::vector<int> fds;
  for (const auto& p : d.paths) fds.push_back(::open(p.c_str(), O_RDONLY));
  std::vector<uint8_t> out(blocks.size() * kBlock);
  for (size_t i = 0; i < blocks.size(); ++i) {
    detail::Location loc = layout.map(static_cast<uint64_t>(blocks[i]));
    EXPECT_EQ(::pread(fds[loc.device], out.data() + i * kBlock, kBlock, static_cast<off_t>(loc.offset)),
              static_cast<ssize_t>(kBlock));
  }
  for (int fd : fds) ::close(fd);
  return out;
}

std::vector<int64_t> ids(const std::string& kind, size_t n, uint64_t total, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    if (kind == "sequential") v[i] = static_cast<int64_t>((17 + i) % total);
    else if (kind == "duplicates") v[i] = static_cast<int64_t>(rng() % 40);  // every block many times
    else v[i] = static_cast<int64_t>(rng() % total);
  }
  return v;
}

// Reads blocks into a fresh "device" buffer (poisoned first) and returns it.
std::vector<uint8_t> read_device(Engine& e, const std::vector<int64_t>& blocks) {
  std::vector<uint8_t> dst(blocks.size() * kBlock, 0xA5);
  e.submit(IoOp::read, blocks.data(), blocks.size(), dst.data(), MemKind::device).wait();
  return dst;
}

size_t first_mismatch(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return i / kBlock;
  return SIZE_MAX;
}

}  // namespace

class OrderedStaging : public ::testing::TestWithParam<const char*> {};

TEST_P(OrderedStaging, DeviceReadsMatchPread) {
  Devices d(3, std::string("ord_") + GetParam());
  HostMover mover;
  auto e = Engine::create(options(d, 3));
  e->set_device_mover(&mover);
  // 2500 blocks: one full window (2048) and a short one whose last chunk is short too.
  auto blocks = ids(GetParam(), 2500, e->total_blocks(), 11);
  auto got = read_device(*e, blocks);
  auto want = expected(d, blocks, 16384);
  EXPECT_EQ(first_mismatch(got, want), SIZE_MAX);
  EngineStats s = e->stats();
  EXPECT_EQ(s.staging_mode, "ordered");
  EXPECT_EQ(s.ordered_blocks, 2500u);
  EXPECT_EQ(s.slot_blocks, 0u);
  EXPECT_EQ(s.ordered_fallbacks, 0u);
  // One copy per 256 KiB chunk (64 blocks), not per extent: ceil(2048/64) + ceil(452/64) = 32 + 8.
  EXPECT_EQ(s.device_copies, 40u);
  EXPECT_EQ(s.device_copy_bytes, 2500u * kBlock);
  EXPECT_EQ(mover.copies(), 40u);
  e->close();
}

INSTANTIATE_TEST_SUITE_P(Ids, OrderedStaging, ::testing::Values("random", "sequential", "duplicates"));

TEST(OrderedStagingPaths, SmallBatchesKeepSlots) {
  Devices d(2, "ord_small");
  HostMover mover;
  auto e = Engine::create(options(d, 2, "posix"));
  e->set_device_mover(&mover);
  for (size_t n : {size_t{1}, size_t{63}}) {  // below limits::ordered_min_bytes: one copy per extent
    auto blocks = ids("random", n, e->total_blocks(), static_cast<uint32_t>(n));
    EXPECT_EQ(first_mismatch(read_device(*e, blocks), expected(d, blocks, 16384)), SIZE_MAX) << n;
  }
  EngineStats s = e->stats();
  EXPECT_EQ(s.staging_mode, "slots");
  EXPECT_EQ(s.slot_blocks, 64u);
  EXPECT_EQ(s.ordered_blocks, 0u);
  auto blocks = ids("random", 64, e->total_blocks(), 3);
  EXPECT_EQ(first_mismatch(read_device(*e, blocks), expected(d, blocks, 16384)), SIZE_MAX);
  EXPECT_EQ(e->stats().staging_mode, "ordered+slots");
}

TEST(OrderedStagingPaths, BatchBiggerThanTheAreaFallsBackAndIsRight) {
  Devices d(3, "ord_big");
  // Area of one window (8 MiB): a batch of 2.5 windows gets the first, the others find it taken.
  HostMover mover;
  EngineOptions o = options(d, 2);
  o.ordered_staging_bytes = limits::ordered_window_bytes;
  auto e = Engine::create(o);
  e->set_device_mover(&mover);
  auto blocks = ids("random", 5000, e->total_blocks(), 5);
  EXPECT_EQ(first_mismatch(read_device(*e, blocks), expected(d, blocks, 16384)), SIZE_MAX);
  EngineStats s = e->stats();
  EXPECT_EQ(s.staging_mode, "ordered+slots");
  EXPECT_EQ(s.ordered_blocks, 2048u);
  EXPECT_EQ(s.slot_blocks, 5000u - 2048u);
  EXPECT_EQ(s.ordered_fallbacks, 2u);
  // An area too small for any window: every window falls back; and 0 turns the path off.
  for (uint64_t area : {uint64_t{2} * limits::ordered_chunk_bytes, uint64_t{0}}) {
    o.ordered_staging_bytes = area;
    auto f = Engine::create(o);
    f->set_device_mover(&mover);
    auto b2 = ids("random", 3000, f->total_blocks(), 6);
    EXPECT_EQ(first_mismatch(read_device(*f, b2), expected(d, b2, 16384)), SIZE_MAX) << area;
    EXPECT_EQ(f->stats().staging_mode, "slots") << area;
    EXPECT_EQ(f->stats().ordered_fallbacks, area ? 2u : 0u) << area;
  }
}

TEST(OrderedStagingPaths, RegionsComeBackAfterEveryBatch) {
  // Many batches in turn through an area of one window: were a region kept (or released twice) the later
  // ones would fall back (or the allocator would assert).
  Devices d(2, "ord_reuse");
  HostMover mover;
  EngineOptions o = options(d, 2);
  o.ordered_staging_bytes = limits::ordered_window_bytes;
  auto e = Engine::create(o);
  e->set_device_mover(&mover);
  for (uint32_t k = 0; k < 12; ++k) {
    auto blocks = ids(k % 2 ? "random" : "sequential", 700 + 97 * k, e->total_blocks(), k);
    ASSERT_EQ(first_mismatch(read_device(*e, blocks), expected(d, blocks, 16384)), SIZE_MAX) << k;
  }
  EXPECT_EQ(e->stats().ordered_fallbacks, 0u);
  EXPECT_EQ(e->stats().staging_mode, "ordered");
}

TEST(OrderedStagingPaths, RegionIsNotReusedWhileItsCopyIsPending) {
  // Slow copies (300 ms) and an area of one window: batch A's reads land in its region long before its copies
  // run; batch B, submitted meanwhile, must not get (and overwrite) that region: it goes through slots.
  Devices d(2, "ord_pending");
  HostMover mover(-1, 300000);
  EngineOptions o = options(d, 2, "posix");
  o.ordered_staging_bytes = limits::ordered_window_bytes;
  auto e = Engine::create(o);
  e->set_device_mover(&mover);
  for (uint32_t k = 0; k < 3; ++k) {
    auto a = ids("random", 1500, e->total_blocks(), 2 * k), b = ids("random", 1500, e->total_blocks(), 2 * k + 1);
    std::vector<uint8_t> ga(a.size() * kBlock), gb(b.size() * kBlock);
    const uint64_t copies0 = e->stats().device_copies;
    BatchHandle ha = e->submit(IoOp::read, a.data(), a.size(), ga.data(), MemKind::device);
    // Until every chunk of A has landed in host (its 24 copies are queued), not yet copied.
    for (int i = 0; i < 5000 && e->stats().device_copies < copies0 + 24; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_FALSE(ha.done());
    BatchHandle hb = e->submit(IoOp::read, b.data(), b.size(), gb.data(), MemKind::device);
    ha.wait();
    hb.wait();
    EXPECT_EQ(first_mismatch(ga, expected(d, a, 16384)), SIZE_MAX) << k;
    EXPECT_EQ(first_mismatch(gb, expected(d, b, 16384)), SIZE_MAX) << k;
  }
  EXPECT_EQ(e->stats().ordered_blocks, 3 * 1500u);  // every A; every B found the area taken
  EXPECT_EQ(e->stats().ordered_fallbacks, 3u);
}

TEST(OrderedStagingPaths, FailedBlockIsNamedAndTheOthersLand) {
  Devices d(2, "ord_fault");
  HostMover mover;
  EngineOptions o = options(d, 2, "fault:uring");
  o.backend.fault.eio_rate = 0.02;  // per request; decisions are a function of (seed, device, offset)
  o.backend.fault.seed = 3;
  auto e = Engine::create(o);
  e->set_device_mover(&mover);
  auto blocks = ids("random", 2000, e->total_blocks(), 9);
  std::vector<uint8_t> got(blocks.size() * kBlock, 0xA5);
  int err = 0;
  std::string what;
  try {
    e->submit(IoOp::read, blocks.data(), blocks.size(), got.data(), MemKind::device).wait();
  } catch (const IoError& ex) {
    err = ex.error_code();
    what = ex.what();
  }
  ASSERT_EQ(err, EIO) << "the seed must make some request fail";
  auto want = expected(d, blocks, 16384);
  // Each block either arrived intact or is one of the failed ones (zeros); the message names the first failed.
  size_t intact = 0, failed = 0, first_failed = SIZE_MAX;
  const std::vector<uint8_t> zeros(kBlock, 0);
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (std::memcmp(got.data() + i * kBlock, want.data() + i * kBlock, kBlock) == 0) {
      ++intact;
    } else {
      ASSERT_EQ(std::memcmp(got.data() + i * kBlock, zeros.data(), kBlock), 0) << "block index " << i;
      if (failed++ == 0) first_failed = i;
    }
  }
  EXPECT_GT(failed, 0u);
  EXPECT_GT(intact, blocks.size() / 2);
  EXPECT_NE(what.find("(index " + std::to_string(first_failed) + " "), std::string::npos) << what;
  EXPECT_EQ(e->stats().staging_mode, "ordered");
}

TEST(OrderedStagingPaths, FailedCopyFailsTheBatchAndFreesTheArea) {
  Devices d(2, "ord_copyfail");
  HostMover mover(/*fail_after_groups=*/0);
  EngineOptions o = options(d, 1);
  o.ordered_staging_bytes = limits::ordered_window_bytes;
  auto e = Engine::create(o);
  e->set_device_mover(&mover);
  auto blocks = ids("random", 1000, e->total_blocks(), 1);
  std::vector<uint8_t> got(blocks.size() * kBlock);
  try {
    e->submit(IoOp::read, blocks.data(), blocks.size(), got.data(), MemKind::device).wait();
    ADD_FAILURE() << "expected EIO from the copy";
  } catch (const IoError& ex) {
    EXPECT_EQ(ex.error_code(), EIO);
    EXPECT_NE(std::string(ex.what()).find("block " + std::to_string(blocks[0]) + " (index 0 "), std::string::npos)
        << ex.what();
  }
  // The region came back: a second batch gets the area again (its copies fail too: the mover is broken).
  EXPECT_THROW(e->submit(IoOp::read, blocks.data(), blocks.size(), got.data(), MemKind::device).wait(), IoError);
  EXPECT_EQ(e->stats().ordered_fallbacks, 0u);
}

TEST(OrderedStagingPaths, ConcurrentBatchesFromSeveralThreads) {
  Devices d(4, "ord_conc");
  HostMover mover;
  EngineOptions o = options(d, 3, "posix");
  o.ordered_staging_bytes = 3 * limits::ordered_window_bytes;  // fewer windows than in flight: some fall back
  auto e = Engine::create(o);
  e->set_device_mover(&mover);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t k = 0; k < 4; ++k) {
        auto blocks = ids(k % 2 ? "duplicates" : "random", 300 + 811 * ((t + k) % 4), e->total_blocks(), 31 * t + k);
        if (first_mismatch(read_device(*e, blocks), expected(d, blocks, 16384)) != SIZE_MAX) bad.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EngineStats s = e->stats();
  EXPECT_GT(s.ordered_blocks, 0u);
  EXPECT_EQ(s.ordered_blocks + s.slot_blocks, s.blocks);
}

TEST(OrderedStagingPaths, DeviceWritesStillGoThroughSlots) {
  Devices d(2, "ord_write");
  HostMover mover;
  auto e = Engine::create(options(d, 2));
  e->set_device_mover(&mover);
  auto blocks = ids("sequential", 600, e->total_blocks(), 0);
  std::vector<uint8_t> src(blocks.size() * kBlock);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  e->submit(IoOp::write, blocks.data(), blocks.size(), src.data(), MemKind::device).wait();
  EXPECT_EQ(first_mismatch(read_device(*e, blocks), src), SIZE_MAX);
  EXPECT_EQ(e->stats().ordered_blocks, 600u);  // the read back; the write staged by slot (stage_in)
}
