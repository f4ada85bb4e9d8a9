// The process's one pinned pool (engine/pinned_pool.hpp): pooled blocks made once and reused by size, owned blocks
// counted apart and unmapped when let go, fixed allocations counted, counters consistent under threads taking and
// giving at once, the engine's staging one of its blocks, and a forked child starting a pool of its own.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "engine/pinned_pool.hpp"
#include "engine/staging.hpp"
#include "gpuio/pinned_pool.hpp"

namespace gpuio {
namespace {

using detail::PinnedBlock;
using detail::PinnedReuse;
constexpr uint64_t MiB = 1u << 20;

PinnedUseStats use(const char* name) {
  PinnedPoolStats s = pinned_pool_stats();
  auto it = s.uses.find(name);
  return it == s.uses.end() ? PinnedUseStats{} : it->second;
}

TEST(PinnedPool, PooledBlocksAreMadeOnceAndReusedBySize) {
  pinned_pool_release();  // no free block left by other tests
  auto a = PinnedBlock::take(5000, false, PinnedReuse::pooled, "t_reuse");
  ASSERT_EQ(a->bytes(), 2 * MiB);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data()) % (2 * MiB), 0u);
  std::memset(a->data(), 1, a->bytes());
  auto b = PinnedBlock::take(3 * MiB, false, PinnedReuse::pooled, "t_reuse");
  EXPECT_EQ(b->bytes(), 4 * MiB);
  EXPECT_EQ(use("t_reuse").made_bytes, 6 * MiB);
  uint8_t* first = a->data();
  a.reset();
  EXPECT_EQ(use("t_reuse").free_bytes, 2 * MiB);
  auto c = PinnedBlock::take(2 * MiB, false, PinnedReuse::pooled, "t_other");  // another use takes it over
  EXPECT_EQ(c->data(), first);
  EXPECT_EQ(use("t_reuse").made_bytes, 4 * MiB);
  EXPECT_EQ(use("t_other").made_bytes, 2 * MiB);
  c.reset();
  b.reset();
  PinnedPoolStats s = pinned_pool_stats();
  EXPECT_EQ(s.pools, 1u);
  EXPECT_GE(s.free_bytes, 6 * MiB);
  EXPECT_EQ(pinned_pool_release(), s.free_bytes);
  EXPECT_EQ(pinned_pool_stats().made_bytes, 0u);
  EXPECT_EQ(pinned_pool_stats().uses.count("t_reuse"), 0u);
}

TEST(PinnedPool, OwnedBlocksAreCountedApartAndUnmappedWhenLetGo) {
  PinnedPoolStats before = pinned_pool_stats();
  auto b = PinnedBlock::take(3 * MiB, false, PinnedReuse::owned, "t_owned", 0);
  EXPECT_EQ(pinned_pool_stats().owned_bytes, before.owned_bytes + 4 * MiB);
  EXPECT_EQ(pinned_pool_stats().made_bytes, before.made_bytes);
  b->data()[b->bytes() - 1] = 1;  // faulted in on use
  b.reset();
  EXPECT_EQ(pinned_pool_stats().owned_bytes, before.owned_bytes);
  EXPECT_EQ(pinned_pool_stats().free_bytes, before.free_bytes);  // not kept
}

TEST(PinnedPool, RegistrationIsRefusedWithoutCudaAndCounted) {
  auto b = PinnedBlock::take(MiB, false, PinnedReuse::owned, "t_reg");
  std::string why;
  if (b->register_now(&why)) {  // a GPU machine: registered, counted page-locked, undone
    EXPECT_EQ(use("t_reg").registered_bytes, 2 * MiB);
    EXPECT_GE(pinned_pool_stats().page_locked_bytes, 2 * MiB);
    b->unregister_now();
    EXPECT_EQ(use("t_reg").registered_bytes, 0u);
    return;
  }
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(b->registered());
  EXPECT_EQ(use("t_reg").registered_bytes, 0u);
}

TEST(PinnedPool, FixedAllocationsAreCountedPageLocked) {
  PinnedPoolStats before = pinned_pool_stats();
  detail::pinned_note_fixed("t_fixed", 4096);
  PinnedPoolStats s = pinned_pool_stats();
  EXPECT_EQ(s.fixed_bytes, before.fixed_bytes + 4096);
  EXPECT_EQ(s.page_locked_bytes, before.page_locked_bytes + 4096);
  EXPECT_EQ(use("t_fixed").registered_bytes, 4096u);
  detail::pinned_note_fixed("t_fixed", -4096);
  EXPECT_EQ(pinned_pool_stats().fixed_bytes, before.fixed_bytes);
  EXPECT_EQ(pinned_pool_stats().uses.count("t_fixed"), 0u);
}

TEST(PinnedPool, CountersStayConsistentUnderThreadsTakingAndGiving) {
  pinned_pool_release();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 50; ++i) {
        auto b = PinnedBlock::take((1 + (i + t) % 3) * MiB, false, (i % 4) ? PinnedReuse::pooled : PinnedReuse::owned,
                                   t % 2 ? "t_threads_a" : "t_threads_b");
        b->data()[0] = static_cast<uint8_t>(i);
      }
    });
  }
  for (auto& th : threads) th.join();
  PinnedPoolStats s = pinned_pool_stats();
  EXPECT_EQ(s.made_bytes, s.free_bytes);  // every pooled block back
  EXPECT_LE(s.made_bytes, 8 * 2 * (4 * MiB));  // at most one block per size and thread in the free list
  uint64_t made = 0, free = 0;
  for (auto& [name, u] : s.uses) {
    if (name.rfind("t_threads", 0) == 0) {
      made += u.made_bytes;
      free += u.free_bytes;
    }
  }
  EXPECT_EQ(made, free);
  pinned_pool_release();
  EXPECT_EQ(pinned_pool_stats().uses.count("t_threads_a"), 0u);
}

TEST(PinnedPool, EngineStagingIsAnOwnedBlockOfThePool) {
  PinnedUseStats before = use("engine_staging");
  {
    detail::StagingPool staging(8 * MiB, 128u << 10, 2, 4 * MiB);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(staging.base()) % (2 * MiB), 0u);
    EXPECT_EQ(use("engine_staging").made_bytes, before.made_bytes + 12 * MiB);
    EXPECT_EQ(use("engine_staging").free_bytes, before.free_bytes);
  }
  EXPECT_EQ(use("engine_staging").made_bytes, before.made_bytes);
}

TEST(PinnedPool, AForkedChildStartsItsOwnPool) {
  pinned_pool_release();
  auto parent = PinnedBlock::take(MiB, false, PinnedReuse::pooled, "t_fork");
  uint8_t* parent_data = parent->data();
  parent.reset();  // free in the parent's pool
  pid_t pid = fork();
  if (pid == 0) {  // the child: exit code 0 when every check holds
    int bad = 0;
    if (use("t_fork").made_bytes != 0 || pinned_pool_stats().free_bytes != 0) bad |= 1;
    auto child = PinnedBlock::take(MiB, false, PinnedReuse::pooled, "t_fork");
    if (child->data() == parent_data) bad |= 2;  // a block of its own, not the parent's free one
    if (use("t_fork").made_bytes != 2 * MiB) bad |= 4;
    child.reset();
    if (pinned_pool_release() != 2 * MiB) bad |= 8;
    _exit(bad);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(use("t_fork").free_bytes, 2 * MiB);  // the parent's pool is as it was
  pinned_pool_release();
}

}  // namespace
}  // namespace gpuio
