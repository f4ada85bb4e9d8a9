// The stream-ordered path's bounce pool (gpu.hpp says why it exists): pinned, host-mapped memory cut into
// gpu_limits::bounce_slots equal slots, each with room for its data and its block ids. A stream request
// takes one slot per chunk; the slot comes back once an event recorded on the caller's stream after the
// chunk's last use (the bounce->GPU copy) has passed. The slots' memory (data, then ids) is one owned block of
// the process's one pinned pool (engine/pinned_pool.hpp). Requests captured into a CUDA graph get dedicated
// regions instead, kept until close: a graph replays them any number of times. Those stay cudaHostAlloc's
// (gpu/host_alloc.hpp counts them): they are made while a capture is under way, sized per request, often a few
// KiB, and the pool's 2 MiB granules would make each of them (data and ids) 2 MiB.
// Thread contract: reserve/release/unreserve/dedicated from any thread (one mutex); the poller calls
// host_ids() only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/pinned_pool.hpp"

namespace gpuio::detail {

struct BounceRegion {
  uint8_t* data = nullptr;     // host view (cudaMemcpyAsync takes it as given under UVA)
  uint8_t* data_dev = nullptr; // device view of the same data (what a kernel reads: registered memory's device
                               // address need not equal its host address)
  int64_t* ids = nullptr;      // host view of the block ids slot
  int64_t* ids_dev = nullptr;  // device view of the same ids (what a publish kernel writes)
  int slot = -1;               // -1: a dedicated (graph) region
};

class BouncePool {
 public:
  BouncePool() = default;
  BouncePool(const BouncePool&) = delete;
  BouncePool& operator=(const BouncePool&) = delete;
  ~BouncePool() { destroy(); }

  // Allocates the pool: bytes rounded down to whole blocks per slot (at least one block a slot).
  void init(uint64_t bytes, uint32_t block_bytes);
  void destroy();
  uint32_t slot_blocks() const { return slot_blocks_; }
  uint64_t bytes() const { return uint64_t{slot_blocks_} * block_bytes_ * slots_; }

  // A free slot; reclaims slots whose release event passed, waiting up to wait_ms (sets *waited). Throws
  // IoError(ETIMEDOUT) naming the pool when none comes free in time.
  BounceRegion reserve(uint32_t wait_ms, bool* waited);
  // A free slot now (after reclaiming passed releases), or false: never waits.
  bool try_reserve(BounceRegion* out);
  // The caller enqueued the slot's last use on `stream`: record the release event there.
  void release_after(const BounceRegion& r, cudaStream_t stream);
  // The slot was reserved but nothing was enqueued (an error before any use): free it now.
  void unreserve(const BounceRegion& r);
  // A region of `blocks` never reused (CUDA-graph capture), freed by destroy().
  BounceRegion dedicated(uint32_t blocks);
  // Host view of block ids the GPU names by a device address inside this pool's ids; nullptr otherwise.
  const int64_t* host_ids(uint64_t device_address) const;

 private:
  void reclaim_locked();
  BounceRegion take_locked();  // pops a free slot (free_ not empty)

  mutable std::mutex mu_;
  uint32_t block_bytes_ = 0;
  uint32_t slot_blocks_ = 0;
  uint32_t slots_ = 0;
  std::unique_ptr<PinnedBlock> block_;  // data_ then ids_
  uint8_t* data_ = nullptr;
  uint8_t* data_dev_ = nullptr;
  int64_t* ids_ = nullptr;
  int64_t* ids_dev_ = nullptr;
  std::vector<int> free_;
  struct InUse {
    int slot;
    cudaEvent_t event;
  };
  std::deque<InUse> in_use_;       // FIFO: release order
  std::vector<cudaEvent_t> events_;  // one per slot, reused
  struct Dedicated {
    uint8_t* data;
    uint8_t* data_dev;
    int64_t* ids;
    int64_t* ids_dev;
    uint32_t blocks;
  };
  std::vector<Dedicated> dedicated_;
};

}  // namespace gpuio::detail
