// The GPU layer's fixed page-locked allocations (cudaHostAlloc): queues, completion cells, id buffers, landing
// slots, copy descriptors, CUDA-graph bounce regions, probes. Small or made where the pinned pool's blocks do not
// fit (2 MiB granules; memory made during stream capture and kept with a graph), they are still counted in the
// process's one pinned pool's stats (gpuio/pinned_pool.hpp: fixed_bytes, by use), so one call reports every
// page-locked byte gpuio holds.
// Thread contract: any thread (one mutex, not held across CUDA calls).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace gpuio::detail {

// cudaHostAlloc(host, bytes, flags), counted under `use` (a name with static storage) when it succeeds.
cudaError_t host_alloc(void** host, size_t bytes, unsigned int flags, const char* use);
// cudaFreeHost of memory host_alloc made (nullptr: nothing), uncounting it.
void host_free(void* host);

}  // namespace gpuio::detail
