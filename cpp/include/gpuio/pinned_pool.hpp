// The process's one pinned pool: every page-locked host byte gpuio holds comes from it or is counted by it. Plain
// C++: the host part is built always, the CUDA registration only with the CUDA layer (GPUIO_HAVE_CUDA).
//
// Blocks are 2 MiB aligned and advised MADV_HUGEPAGE (an O_DIRECT request into 4 KiB pages is one segment per
// page, and the guest and the hypervisor map every page). Two kinds of blocks share the pool's counters:
//   - pooled: kept from one use to the next (mapping, faulting in and registering pages is a cost per block, not
//     per read): the plan reader's rings, gpuio.safetensors' staging slots;
//   - owned: held by one owner for its lifetime, unregistered and unmapped when it lets go: the engine's staging,
//     the stream path's bounce pool, device arrays' staging, host buffers, stream buffers.
// Beside them the GPU layer's small fixed cudaHostAlloc's (queues, completion cells, id buffers, landing slots,
// CUDA-graph bounce regions, probes) are counted as fixed bytes.
// Per process: a forked child's copies were never registered there, so a child starts its own pool.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace gpuio {

struct PinnedUseStats {
  uint64_t made_bytes = 0;        // mapped now (in use, or free in the pool)
  uint64_t registered_bytes = 0;  // of them page-locked (registered with CUDA, or fixed cudaHostAlloc's)
  uint64_t free_bytes = 0;        // of them free pooled blocks
};

struct PinnedPoolStats {
  uint32_t pools = 1;             // one pool per process: the number every page-locked byte below comes from
  uint64_t made_bytes = 0;        // pooled blocks mapped now (in use or free)
  uint64_t registered_bytes = 0;  // of them registered with CUDA
  uint64_t free_bytes = 0;        // of them not in use now (pinned_pool_release lets go of them)
  uint64_t owned_bytes = 0;       // owned blocks mapped now
  uint64_t owned_registered_bytes = 0;  // of them registered with CUDA
  uint64_t fixed_bytes = 0;             // the GPU layer's fixed cudaHostAlloc's
  uint64_t page_locked_bytes = 0;       // registered_bytes + owned_registered_bytes + fixed_bytes
  std::map<std::string, PinnedUseStats> uses;  // by user ("plan_reader", "engine_staging", ...); users holding none left out
};

PinnedPoolStats pinned_pool_stats();
uint64_t pinned_pool_release();  // unmaps (unregisters) the free pooled blocks; returns their bytes

}  // namespace gpuio
