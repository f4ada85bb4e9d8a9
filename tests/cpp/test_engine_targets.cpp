// Targets: one engine serving many files. A shared engine (no paths) opens files as targets, each in its own range
// of block ids; batches may span targets; closing a target refuses its blocks, waits for its batches and releases its
// devices (and their locks); the worker threads do not grow with the files.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>

#include "gpuio/engine.hpp"
#include "test_util.hpp"

using namespace gpuio;
using namespace gpuio::test;

namespace {

EngineOptions shared_engine(const std::string& backend = "uring") {
  EngineOptions o;
  o.backend.kind = backend;
  o.workers = 2;
  return o;
}

TargetOptions target(const std::string& path, bool lock = false) {
  TargetOptions t;
  t.paths = {path};
  t.open.lock = lock;
  t.open.lock_wait_ms = 0;
  return t;
}

// The file's own bytes of block b, as TempFile wrote them.
void expect_block(const uint8_t* got, uint64_t tag, uint64_t b) {
  for (uint32_t j = 0; j < 4096; ++j) ASSERT_EQ(got[j], pattern(tag, b, j)) << "tag " << tag << " block " << b;
}

}  // namespace

TEST(Targets, SharedEngineReadsEachFileAtItsBase) {
  for (const char* backend : {"uring", "posix"}) {
    TempFile a("ta", 1 << 20, 11), b("tb", 2 << 20, 12);
    auto e = Engine::create(shared_engine(backend));
    EXPECT_EQ(e->total_blocks(), 0u);
    EXPECT_EQ(e->target_count(), 0u);
    TargetInfo ta = e->open_target(target(a.path())), tb = e->open_target(target(b.path()));
    EXPECT_EQ(ta.blocks, 256u);
    EXPECT_EQ(tb.blocks, 512u);
    EXPECT_EQ(tb.base_block, ta.base_block + ta.blocks);
    EXPECT_NE(ta.id, tb.id);
    EXPECT_EQ(e->total_blocks(), tb.base_block + tb.blocks);
    ASSERT_EQ(tb.devices.size(), 1u);
    EXPECT_EQ(tb.devices[0].path, b.path());
    // One batch over both files, interleaved, unaligned memory too (staged).
    std::vector<int64_t> ids = {int64_t(tb.base_block + 7), int64_t(ta.base_block + 3), int64_t(tb.base_block + 8),
                                int64_t(ta.base_block + 255)};
    for (size_t misalign : {size_t{0}, size_t{8}}) {
      HostBuffer out(ids.size() * 4096, misalign);
      e->read(ids.data(), ids.size(), out.ptr);
      expect_block(out.ptr, 12, 7);
      expect_block(out.ptr + 4096, 11, 3);
      expect_block(out.ptr + 8192, 12, 8);
      expect_block(out.ptr + 3 * 4096, 11, 255);
    }
    // A write lands in its own file only.
    HostBuffer src(4096);
    std::memset(src.ptr, 0x5A, 4096);
    int64_t w = int64_t(ta.base_block + 1);
    e->write(&w, 1, src.ptr);
    e->sync_target(ta.id);
    int fd = ::open(a.path().c_str(), O_RDONLY);
    std::vector<uint8_t> back(4096);
    ASSERT_EQ(::pread(fd, back.data(), 4096, 4096), 4096);
    ::close(fd);
    EXPECT_EQ(back[0], 0x5A);
    EXPECT_EQ(back[4095], 0x5A);
    HostBuffer other(4096);
    int64_t same_in_b = int64_t(tb.base_block + 1);
    e->read(&same_in_b, 1, other.ptr);
    expect_block(other.ptr, 12, 1);
  }
}

TEST(Targets, ClosedTargetRefusesItsBlocksAndReleasesItsLock) {
  TempFile a("tl", 1 << 20, 21), b("tm", 1 << 20, 22);
  auto e = Engine::create(shared_engine());
  TargetInfo ta = e->open_target(target(a.path(), /*lock=*/true));
  TargetInfo tb = e->open_target(target(b.path()));
  int fd = ::open(a.path().c_str(), O_RDONLY);
  EXPECT_NE(flock(fd, LOCK_EX | LOCK_NB), 0);  // the target holds it
  e->close_target(ta.id);
  EXPECT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0) << "closing the target must drop its lock";
  flock(fd, LOCK_UN);
  ::close(fd);
  HostBuffer out(4096);
  int64_t gone = int64_t(ta.base_block);
  try {
    e->read(&gone, 1, out.ptr);
    FAIL() << "a closed target's block was read";
  } catch (const std::out_of_range& err) {
    EXPECT_NE(std::string(err.what()).find("no open file"), std::string::npos) << err.what();
  }
  EXPECT_THROW(e->close_target(ta.id), std::invalid_argument);
  EXPECT_EQ(e->target_count(), 1u);
  // The other file still reads, and a reopened file gets a new range of ids (old ids stay refused).
  int64_t kept = int64_t(tb.base_block + 2);
  e->read(&kept, 1, out.ptr);
  expect_block(out.ptr, 22, 2);
  TargetInfo again = e->open_target(target(a.path()));
  EXPECT_GE(again.base_block, tb.base_block + tb.blocks);
  int64_t reopened = int64_t(again.base_block + 4);
  e->read(&reopened, 1, out.ptr);
  expect_block(out.ptr, 21, 4);
  EXPECT_THROW(e->read(&gone, 1, out.ptr), std::out_of_range);
}

// close() of a file is the end of its lock, though the open file lives on elsewhere: here in a forked child that
// inherited the descriptor (a kernel reference, such as an io_uring request's, does the same), and the child never
// unlocks what its parent holds.
TEST(Targets, CloseDropsTheLockWhileAnotherReferenceLives) {
  TempFile a("tr", 1 << 20, 23);
  auto e = Engine::create(shared_engine());
  TargetInfo ta = e->open_target(target(a.path(), /*lock=*/true));
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // holds the inherited descriptor until told to end
    char c;
    (void)!read(go[0], &c, 1);
    _exit(0);
  }
  int fd = ::open(a.path().c_str(), O_RDONLY);
  EXPECT_NE(flock(fd, LOCK_EX | LOCK_NB), 0);  // the target holds it
  e->close_target(ta.id);
  EXPECT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0) << "the lock outlived close_target while a child held the file";
  flock(fd, LOCK_UN);
  ::close(fd);
  ASSERT_EQ(write(go[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ::close(go[0]);
  ::close(go[1]);
}

TEST(Targets, CloseWaitsForBatchesInFlight) {
  TempFile a("tw", 8 << 20, 31);
  EngineOptions o = shared_engine();
  o.queue_depth = 2;
  o.io_bytes_max = 4096;  // 2048 requests two at a time: still in flight when close_target starts
  auto e = Engine::create(o);
  TargetInfo ta = e->open_target(target(a.path()));
  std::vector<int64_t> ids(ta.blocks);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(ta.base_block + ids.size() - 1 - i);
  HostBuffer out(ids.size() * 4096);
  BatchHandle h = e->submit(IoOp::read, ids.data(), ids.size(), out.ptr);
  e->close_target(ta.id);
  // Had the file closed under the batch, its later requests would have failed (EBADF) and wait() would throw.
  h.wait();
  for (size_t i = 0; i < ids.size(); i += 97) expect_block(out.ptr + i * 4096, 31, ids.size() - 1 - i);
}

TEST(Targets, ThirtyFilesShareTheWorkers) {
  std::vector<std::unique_ptr<TempFile>> files;
  auto e = Engine::create(shared_engine());
  const uint32_t workers = e->stats().workers;
  std::vector<TargetInfo> ts;
  for (int i = 0; i < 30; ++i) {
    files.push_back(std::make_unique<TempFile>("t30_" + std::to_string(i), 64 << 10, 100 + i));
    ts.push_back(e->open_target(target(files.back()->path())));
  }
  EXPECT_EQ(e->stats().workers, workers);
  EXPECT_EQ(e->target_count(), 30u);
  // Readers on several threads, each over all files.
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      HostBuffer out(30 * 4096);
      std::vector<int64_t> ids;
      for (int i = 0; i < 30; ++i) ids.push_back(int64_t(ts[i].base_block + (i + t) % 16));
      for (int round = 0; round < 20; ++round) {
        e->read(ids.data(), ids.size(), out.ptr);
        for (int i = 0; i < 30; ++i)
          if (out.ptr[i * 4096 + 9] != pattern(100 + i, (i + t) % 16, 9)) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  for (const auto& t : ts) e->close_target(t.id);
  EXPECT_EQ(e->total_blocks(), 0u);
}

TEST(Targets, RefusedWhereTheBackendOpensNothingLater) {
  EngineOptions sim = shared_engine("sim");
  EXPECT_THROW(Engine::create(sim), std::invalid_argument);  // no paths: only uring and posix
  TempFile a("ts", 1 << 20, 41);
  EngineOptions o;
  o.paths = {"sim0"};
  o.backend.kind = "sim";
  o.workers = 1;
  auto e = Engine::create(o);
  EXPECT_THROW(e->open_target(target(a.path())), std::invalid_argument);
  auto u = Engine::create(shared_engine());
  EXPECT_THROW(u->open_target(target(a.path() + ".missing")), IoError);
  EXPECT_EQ(u->target_count(), 0u);
  TargetOptions none;
  EXPECT_THROW(u->open_target(none), std::invalid_argument);
}

#include <sys/wait.h>

// A forked child inherits the engine object but none of its worker threads: using it fails at once, naming the
// processes, and closing it (or destroying it) returns at once instead of joining threads that are not there.
TEST(Targets, ForkedChildIsRefusedAtOnceAndClosesWithoutJoining) {
  TempFile a("tf", 4 << 20, 51);
  EngineOptions o = shared_engine();
  o.queue_depth = 1;
  o.io_bytes_max = 4096;
  auto e = Engine::create(o);
  TargetInfo ta = e->open_target(target(a.path()));
  std::vector<int64_t> ids(ta.blocks);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(ta.base_block + i);
  HostBuffer out(ids.size() * 4096);
  BatchHandle h = e->submit(IoOp::read, ids.data(), ids.size(), out.ptr);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20);  // a hang fails the test instead of stalling it
    int code = 0;
    if (!h.done()) {
      try {
        h.wait(60000);
        code |= 1;
      } catch (const std::runtime_error& err) {
        if (std::string(err.what()).find("fork") == std::string::npos) code |= 2;
      }
    }
    try {
      HostBuffer one(4096);
      e->read(ids.data(), 1, one.ptr);
      code |= 4;
    } catch (const std::runtime_error& err) {
      if (std::string(err.what()).find("belongs to process") == std::string::npos) code |= 8;
    }
    try {
      e->open_target(target(a.path()));
      code |= 16;
    } catch (const std::runtime_error&) {
    }
    e.reset();  // close + destroy in the child: must not join the parent's threads
    _exit(code);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed (hung past its alarm?)";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  h.wait();  // the parent's engine is untouched
  expect_block(out.ptr + 1000 * 4096, 51, 1000);
}
