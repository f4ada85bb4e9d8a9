// Targets: the files (or RAID-0 sets) one engine serves. Each takes a range of the engine's block ids, [base,
// base + blocks), so a request names engine blocks and every layer above the engine (GPU path, device queues, array
// caches) stays unaware of which file a block belongs to. An engine made with paths has target 0 at base 0; a
// process's shared engine starts with none and opens one per file (Engine::open_target).
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/layout.hpp"
#include "gpuio/io.hpp"

namespace gpuio::detail {

struct Target {
  Target(uint32_t id_, uint64_t base_, Layout layout_, std::vector<uint32_t> devices_)
      : id(id_), base(base_), layout(std::move(layout_)), devices(std::move(devices_)) {}
  uint32_t id;
  uint64_t base;                  // its first engine block
  Layout layout;                  // target-relative block -> (index into devices, byte offset)
  std::vector<uint32_t> devices;  // backend device indices
  uint64_t end() const { return base + layout.total_blocks(); }

  // Batches in flight that touch this target: closing it waits until none is left before its devices close.
  std::atomic<uint64_t> batches{0};
  std::mutex mu;
  std::condition_variable idle;
  void batch_ended() {
    if (batches.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    std::lock_guard<std::mutex> g(mu);
    idle.notify_all();
  }
  void wait_idle() {
    std::unique_lock<std::mutex> g(mu);
    idle.wait(g, [&] { return batches.load(std::memory_order_acquire) == 0; });
  }
};

// The open targets, by base: an immutable snapshot, replaced whole when a target opens or closes (under the engine's
// submit lock), so submitters read it without taking a lock per block.
struct TargetMap {
  std::vector<std::shared_ptr<Target>> targets;  // ascending base, ranges disjoint
  uint64_t end = 0;                              // engine blocks addressed: the highest end

  // Index into targets of the one holding block, or -1.
  ptrdiff_t find(uint64_t block) const {
    auto it = std::upper_bound(targets.begin(), targets.end(), block,
                               [](uint64_t b, const std::shared_ptr<Target>& t) { return b < t->base; });
    if (it == targets.begin()) return -1;
    --it;
    return block < (*it)->end() ? it - targets.begin() : -1;
  }
};

}  // namespace gpuio::detail
