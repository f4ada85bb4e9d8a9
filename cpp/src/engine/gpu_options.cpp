// The GPU path's knobs (GpuOptions, gpuio/gpu.hpp). Here rather than in gpu/ because a build without CUDA lists and
// checks them too: gpuio.defaults reads this table, and a bad value set there is refused before any GPU exists.
#include <limits>
#include <string>

#include "gpuio/gpu.hpp"
#include "gpuio/knobs.hpp"
#include "gpuio/status.hpp"

namespace gpuio {

#define FIELD(member) [](GpuOptions& o) -> KnobField { return &o.member; }

const std::vector<Knob<GpuOptions>>& gpu_knobs() {
  constexpr int64_t u32_max = std::numeric_limits<uint32_t>::max();
  static const std::vector<Knob<GpuOptions>> table = {
      {"queues", FIELD(queues), "device-API queues (one per thread block avoids serialising)", 1,
       gpu_limits::queues_max},
      {"copy", FIELD(copy),
       "staging->GPU copies of the engine's batches: auto (measured at start) | batch | kernel | percopy", 1, 0,
       "auto|batch|kernel|percopy"},
      {"stream_wait", FIELD(stream_wait),
       "stream-ordered wait for a chunk: kernel (a 1-thread poll kernel) | wait_value (cuStreamWaitValue32 on a "
       "host-mapped flag, no SM; only where the start-up self-test saw it release)",
       1, 0, "kernel|wait_value"},
      {"device", FIELD(device), "CUDA device; -1: the current one", -1, std::numeric_limits<int32_t>::max()},
      {"poll_spin_us", FIELD(poll_spin_us), "the control plane spins this long after the last request, then naps", 0,
       u32_max},
      {"bounce_bytes", FIELD(bounce_bytes),
       "stream path: pinned bounce pool (reads land here, then one copy per chunk of bounce_bytes / 16 on the "
       "caller's stream)",
       static_cast<int64_t>(gpu_limits::bounce_bytes_min), int64_t{1} << 40},
      {"bounce_wait_ms", FIELD(bounce_wait_ms), "a submit waits at most this long for bounce space, then ETIMEDOUT",
       1, u32_max},
      {"stream_copy", FIELD(stream_copy),
       "stream path, bounce -> GPU memory: engine (cudaMemcpyAsync on the caller's stream: copy engine, no SM) | "
       "kernel (chunks of at most 64 KiB copied by one warp: the one-block latency path)",
       1, 0, "engine|kernel"},
      {"device_read", FIELD(device_read),
       "device-API reads (DeviceQueue::prefetch in kernels): auto (a read of at most 16 KiB with nothing else "
       "pending on its queue lands in host-mapped memory and the requesting block copies it: the one-block "
       "latency path) | batch (always the engine's staging->GPU copy); stats() reports device_read_mode",
       1, 0, "auto|batch"},
  };
  return table;
}

#undef FIELD

void validate(const GpuOptions& o) {
  // No host-function wait: CUDA forbids a host function waiting on work not ordered before it (the engine's
  // staging->GPU copies run on other streams), and such a wait deadlocked on the H200.
  GPUIO_EXPECT(o.stream_wait != "hostfn",
               "stream_wait='hostfn' is not one of kernel, wait_value (hostfn was removed: a host function may not "
               "wait on the engine's copies, which CUDA does not order before it)");
  check_knobs(gpu_knobs(), o);
}

}  // namespace gpuio
