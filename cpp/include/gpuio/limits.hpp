// Every queue, batch and pool has a named limit here; relations between them are checked at compile time.
// Options structs take their defaults from these; tests shrink them (see tests/cpp/small_limits.hpp).
#pragma once
#include <cstdint>

namespace gpuio::limits {

constexpr uint32_t devices_max = 64;              // devices in one layout
// Device slots of one engine: its first target's devices plus every file opened on it later (Engine::open_target;
// a closed target's slots are reused). Extent::device is 16 bits wide.
constexpr uint32_t open_devices_max = 4096;
constexpr uint32_t workers_max = 64;              // engine worker threads
constexpr uint32_t queue_depth_max = 4096;        // entries in one io queue (ring)
constexpr uint32_t queue_depth_default = 128;
constexpr uint64_t batch_blocks_max = 1ull << 26; // logical blocks in one batch
constexpr uint32_t io_bytes_max = 1u << 20;       // largest single device I/O after merging runs
constexpr uint64_t staging_bytes_default = 32ull << 20;  // whole staging pool
constexpr uint32_t staging_slot_bytes_default = 128u << 10;
constexpr uint64_t staging_bytes_max = 16ull << 30;
constexpr uint32_t block_bytes_min = 512;
constexpr uint32_t block_bytes_max = 1u << 20;
// Direct-device extents shorter than this go through the registered staging pool: on a virtualised disk
// pinning a fresh user page per small O_DIRECT request cost more than copying 4 KiB out of a fixed buffer
// (H200 VM: 4 KiB random reads at 0.67 of the raw reference zero-copy vs 0.93 staged).
constexpr uint32_t direct_min_bytes_default = 16u << 10;
// Engine::read of one contiguous run of at most this many bytes into host memory runs on the calling thread (one
// pread, page cache first), not through a worker: the hand-offs cost more than such a read (engine/inline_read.cpp).
// One request: a longer run, or several, goes to the workers, which overlap its requests.
constexpr uint32_t inline_bytes_max = 128u << 10;
constexpr uint32_t reap_budget_max = 256;         // completions handled per poller pass
constexpr uint32_t posix_threads_default = 32;    // pread/pwrite threads per posix queue
constexpr uint32_t io_timeout_ms_default = 60000; // a batch not done by then fails with ETIMEDOUT
constexpr uint64_t stripe_bytes_default = 64u << 10;  // RAID-0 stripe unit (engines and targets alike)
constexpr uint32_t lock_wait_ms_default = 10000;  // flock: wait this long for another holder (engines and targets)
// Staging->device copies (GPU destinations) are gathered over several worker passes and started together:
// one launch per group, not per completion. A group starts once it is this old, this large, or the worker
// has no device I/O left in flight (so a lone read is never held back).
constexpr uint32_t copy_group_wait_us = 50;
constexpr uint32_t copy_group_runs_max = 512;
constexpr uint64_t copy_group_bytes_max = 8ull << 20;
// Batch-ordered staging (device-memory reads): a read batch into GPU memory of at least ordered_min_bytes gets, per
// window of ordered_window_bytes, one contiguous region of a shared staging area laid out like its destination;
// workers read each block to region + index * block_size, and the worker that lands a chunk's last byte starts
// ONE copy of the whole chunk (ordered_chunk_bytes) to the destination. So the copy engine sees a few large
// copies instead of one descriptor per 4 KiB block (H100: cudaMemcpyBatchAsync of 4 KiB runs capped every
// configuration at ~1.7 M descriptors/s = 1.5-1.8 M IOPS; 5 M IOPS at 256 KiB per copy is ~80 k copies/s).
// Smaller batches (a GPU thread's one-block read) keep the per-slot path and its latency. The area is
// EngineOptions::ordered_staging_bytes (0: off); a window that finds no room in it goes the per-slot path.
constexpr uint64_t ordered_staging_bytes_default = 32ull << 20;
constexpr uint32_t ordered_chunk_bytes = 256u << 10;  // one copy; also the area's allocation unit
constexpr uint64_t ordered_window_bytes = 8ull << 20;  // one region (freed once all its chunks landed)
constexpr uint64_t ordered_min_bytes = ordered_chunk_bytes;
constexpr uint32_t worker_spin_us = 50;           // an idle worker polls its inbox this long before sleeping
// ... and this long in low-latency mode (CPUs to spare): a GPU-initiated one-block read's next request reaches the
// worker only after the done word crossed PCIe, the block copied its data and published again (~15-30 us on the
// H100, more with a slow block), and a futex wake-up of a sleeping worker costs tens of microseconds on a VM.
constexpr uint32_t low_latency_idle_spin_us = 200;
// Low-latency mode: a worker whose ring holds at most this many requests, with nothing else to do, polls for
// their completions (no system call, no wake-up) for up to low_latency_poll_us per wait before blocking in the
// backend. Deeper queues block at once: completions then arrive faster than a wake-up costs.
constexpr uint32_t low_latency_inflight_max = 4;
constexpr uint32_t low_latency_poll_us = 200;
constexpr uint32_t low_latency_spare_cpus = 2;    // low_latency=auto polls only with workers + this many CPUs
// workers=0: the engine starts auto_worker_threads(N, cpus) worker threads for N devices on a process allowed `cpus`
// CPUs, and its controller (engine/controller.hpp) moves how many of them get work by their measured rates,
// starting from CAM's ceil(N/2). The ceiling: the CPUs up to auto_workers_cap, or CAM's ceil(N/2) where that is more
// and the CPUs allow it (more threads than CPUs only adds switches: 6 threads for 12 devices on 2 cores ran slower).
// CAM's own N/2 was too low on the H100 (16 CPUs; docs/decisions/0002): the best hand-picked count for 1 null device
// was 4, for 4 paced devices 6, for 1 /dev/shm file through uring 8 (an emulated device or a uring submit/reap costs
// worker CPU). The cap: every thread owns a slice of the staging pool, so idle threads take slots from busy ones.
constexpr uint32_t auto_workers_cap = 8;
constexpr uint32_t auto_worker_threads(uint32_t devices, uint32_t cpus) {
  uint32_t half = (devices + 1) / 2, by_cpus = cpus < auto_workers_cap ? cpus : auto_workers_cap;
  uint32_t half_fits = half < cpus ? half : cpus;
  uint32_t t = half_fits > by_cpus ? half_fits : by_cpus;
  return t < 1 ? 1 : t > workers_max ? workers_max : t;
}
constexpr uint32_t auto_workers_start(uint32_t devices, uint32_t threads) {
  uint32_t half = (devices + 1) / 2;
  return half < 1 ? 1 : half > threads ? threads : half;
}
// Engine workers of a table (gpuio.TensorFile) whose options name none. The engine's own default for one device
// is CAM's ceil(N/2) = 1, but one queue does not reach a single disk's 4 KiB random-read rate on the GPU
// machine: iobench 1 thread x QD128 173 K vs 2 threads 248 K IOPS; engine 1 worker 137-143 K vs 2 workers
// 170-180 K (benchmarks/RESULTS.md, "Gather rate"), and 4 KiB reads into the GPU reached 0.95 of the raw
// device with 4 workers against 0.83 with 2 (docs/decisions/0002). So 4 workers where the machine has cores for them,
// 2 elsewhere (the 2-core CI box: more workers than cores only add switches). `cpus`: the machine's online
// CPUs (sysconf(_SC_NPROCESSORS_ONLN), what Python's os.cpu_count() reports), not the process's affinity.
constexpr uint32_t table_workers_few_cpus = 2;
constexpr uint32_t table_workers_many_cpus = 4;
constexpr uint32_t table_workers_cpus_min = 16;   // "many": at least this many CPUs
constexpr uint32_t table_workers(uint32_t cpus) {
  return cpus >= table_workers_cpus_min ? table_workers_many_cpus : table_workers_few_cpus;
}
// Blocks per engine batch a table submits (256 MiB at 4 KiB): a larger gather or scatter is cut into batches
// of at most this many blocks, which bounds the staging buffer one batch pins. (Not gpu_limits::request_blocks_max,
// the ids one GPU request carries.)
constexpr uint64_t table_batch_blocks_max = 1ull << 16;

static_assert(queue_depth_default <= queue_depth_max);
static_assert(devices_max <= open_devices_max && open_devices_max <= 65536);
static_assert(staging_slot_bytes_default <= io_bytes_max);
static_assert(inline_bytes_max <= io_bytes_max);
static_assert(staging_bytes_default % staging_slot_bytes_default == 0);
static_assert(block_bytes_max <= io_bytes_max);
static_assert(ordered_window_bytes % ordered_chunk_bytes == 0 && ordered_window_bytes % block_bytes_max == 0);
static_assert(ordered_staging_bytes_default % ordered_chunk_bytes == 0 && ordered_staging_bytes_default <= staging_bytes_max);
static_assert(table_batch_blocks_max <= batch_blocks_max);
static_assert(auto_workers_cap >= 1 && auto_workers_cap <= workers_max);
static_assert(table_workers_few_cpus >= 1 && table_workers_many_cpus <= workers_max);
static_assert((block_bytes_min & (block_bytes_min - 1)) == 0);

}  // namespace gpuio::limits
