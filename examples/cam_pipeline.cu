// CAM Fig. 7 pattern: a persistent kernel where each thread block loops
//     prefetch_synchronize()  -> the current chunk is in GPU memory
//     prefetch(next chunk)    -> returns at once; CPU workers read it while the GPU computes
//     compute on the current chunk
// over a file much larger than the GPU buffers (two chunk buffers per block). The same kernel also runs
// with I/O only and with compute only; the pipeline should take about max(I/O, compute), not the sum.
// Compute per 4-byte word: `rounds` steps of an integer hash, repeated `reps` times over the chunk (volatile
// loads, so each rep reads memory); the per-chunk sums are checked against a CPU reference on sampled chunks.
// Per-chunk trace (thread 0 of each block, %globaltimer): when its read was issued, when the block began to
// wait for it and when it was there, when its compute began and ended, and the SM cycles of that compute.
// Printed per pass: first-chunk latency, I/O wait and compute per chunk (p50/p99/max, first/middle/last chunk
// of each block), the share of block time spent waiting, the tail (last block's end past the median block's),
// the SM clock during compute, the control plane's per-request engine/signal times, and a table over tenths of
// the pass: engine GB/s and queue (host-sampled: requests taken from the rings and not yet read, in chunks),
// GB/s consumed by the blocks, blocks waiting / computing, reads ahead (issued, not yet there), SM MHz.
// Usage: cam_pipeline FILE [chunk_kib=1024] [reps=auto] [rounds=8]   (CAM_TRACE=0: no trace tables)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "gpuio/device.cuh"

#define CHECK(x)                                                                  \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                      \
      std::printf("FAIL %s: %s\n", #x, cudaGetErrorString(e_));                  \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

__host__ __device__ inline uint32_t word_hash(uint32_t x, int rounds) {
  uint32_t acc = 0;
  for (int r = 0; r < rounds; ++r) {
    x = x * 1664525u + 1013904223u;
    acc += x >> (r & 7);
  }
  return acc;
}

enum Mode { kPipeline = 0, kIoOnly = 1, kComputeOnly = 2 };
// per-chunk trace fields (ns of %globaltimer, and SM cycles)
enum Field { kIssue = 0, kWait, kReady, kBegin, kDone, kCycles, kFields };

__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

struct Params {
  const gpuio::QueueRef* queues;
  int64_t* ids;        // 2 x chunk_blocks per thread block
  uint8_t* buffers;    // 2 x chunk_bytes per thread block
  uint32_t* sums;      // one per chunk
  uint64_t chunks;
  uint32_t chunk_blocks, block_bytes;
  int reps, rounds, mode;
  int* err;
  uint64_t* trace;     // kFields per chunk, or null
};

__device__ __forceinline__ void mark(const Params& p, uint64_t chunk, int field, uint64_t v) {
  if (p.trace && threadIdx.x == 0) p.trace[chunk * kFields + field] = v;
}

__device__ void fill_ids(const Params& p, int64_t* ids, uint64_t chunk) {
  for (uint32_t i = threadIdx.x; i < p.chunk_blocks; i += blockDim.x) ids[i] = chunk * p.chunk_blocks + i;
}

__global__ void pipeline(Params p) {
  gpuio::DeviceQueue q(p.queues[blockIdx.x]);
  const size_t chunk_bytes = size_t{p.chunk_blocks} * p.block_bytes;
  int64_t* ids[2] = {p.ids + size_t{blockIdx.x} * 2 * p.chunk_blocks, p.ids + (size_t{blockIdx.x} * 2 + 1) * p.chunk_blocks};
  uint8_t* buf[2] = {p.buffers + size_t{blockIdx.x} * 2 * chunk_bytes, p.buffers + (size_t{blockIdx.x} * 2 + 1) * chunk_bytes};
  __shared__ uint32_t block_sum;
  uint64_t c = blockIdx.x;
  int cur = 0;
  const bool io = p.mode != kComputeOnly, compute = p.mode != kIoOnly;
  if (io && c < p.chunks) {
    fill_ids(p, ids[cur], c);
    q.prefetch(ids[cur], p.chunk_blocks, buf[cur]);
    mark(p, c, kIssue, now_ns());
  }
  for (; c < p.chunks; c += gridDim.x) {
    if (io) {
      mark(p, c, kWait, now_ns());
      int e = q.prefetch_synchronize();
      mark(p, c, kReady, now_ns());
      if (e && threadIdx.x == 0) atomicExch(p.err, e);
      uint64_t next = c + gridDim.x;
      if (next < p.chunks) {
        fill_ids(p, ids[cur ^ 1], next);
        q.prefetch(ids[cur ^ 1], p.chunk_blocks, buf[cur ^ 1]);
        mark(p, next, kIssue, now_ns());
      }
    } else {
      const uint64_t t = now_ns();
      mark(p, c, kIssue, t);
      mark(p, c, kWait, t);
      mark(p, c, kReady, t);
    }
    mark(p, c, kBegin, now_ns());
    const long long cycles0 = clock64();
    if (compute) {
      if (threadIdx.x == 0) block_sum = 0;
      __syncthreads();
      const volatile uint32_t* words = reinterpret_cast<const volatile uint32_t*>(buf[cur]);
      uint32_t s = 0;
      for (int r = 0; r < p.reps; ++r)
        for (size_t i = threadIdx.x; i < chunk_bytes / 4; i += blockDim.x) s += word_hash(words[i], p.rounds);
      atomicAdd(&block_sum, s);
      __syncthreads();
      if (threadIdx.x == 0) p.sums[c] = block_sum;
    }
    mark(p, c, kCycles, uint64_t(clock64() - cycles0));
    mark(p, c, kDone, now_ns());
    __syncthreads();  // every thread done with buf[cur] before it is refilled next round
    cur ^= 1;
  }
}

// One pass: the kernel, its wall time, and (trace) the per-chunk trace, the engine's bytes sampled every
// kSampleMs on the host, and the control plane's per-request hops.
struct Pass {
  double seconds = 0;
  std::vector<uint64_t> trace;                         // kFields per chunk
  struct Sample {
    double t;          // s since launch
    uint64_t bytes;    // engine bytes read so far
    uint64_t taken;    // GPU requests the control plane has taken so far (each one chunk)
  };
  std::vector<Sample> samples;
  std::vector<std::array<uint32_t, 3>> hops;           // {submit, engine, signal} ns, the last ones
};
constexpr int kSampleMs = 5;

static Pass run(Params p, int grid, int mode, gpuio::GpuEngine& ge) {
  Pass out;
  p.mode = mode;
  if (p.trace) CHECK(cudaMemset(p.trace, 0, sizeof(uint64_t) * kFields * p.chunks));
  ge.runtime().take_device_api_trace();  // empty the record: what it holds after the pass is this pass's
  std::atomic<bool> stop{false};
  auto t0 = std::chrono::steady_clock::now();
  std::thread sampler;
  if (p.trace)
    sampler = std::thread([&] {
      while (!stop.load()) {
        double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        out.samples.push_back({t, ge.engine().stats().bytes, ge.runtime().stats().gpu_requests});
        std::this_thread::sleep_for(std::chrono::milliseconds(kSampleMs));
      }
    });
  pipeline<<<grid, 512>>>(p);
  cudaError_t launch = cudaGetLastError(), done = cudaDeviceSynchronize();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stop = true;
  if (sampler.joinable()) sampler.join();
  CHECK(launch);
  CHECK(done);
  if (p.trace) {
    out.trace.resize(size_t{kFields} * p.chunks);
    CHECK(cudaMemcpy(out.trace.data(), p.trace, sizeof(uint64_t) * out.trace.size(), cudaMemcpyDeviceToHost));
    out.hops = ge.runtime().take_device_api_trace();
  }
  return out;
}

static double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * (v.size() - 1) + 0.5))];
}

// Where a pass's time went, from its trace: see the header. Times in ms.
static void report(const char* name, const Pass& ps, uint64_t chunks, int grid, size_t chunk_bytes) {
  if (ps.trace.empty()) return;
  auto f = [&](uint64_t c, int k) { return double(ps.trace[c * kFields + k]); };
  double t0 = 1e300, t1 = 0;
  for (uint64_t c = 0; c < chunks; ++c) t0 = std::min(t0, f(c, kIssue)), t1 = std::max(t1, f(c, kDone));
  const double span = t1 - t0;
  std::vector<double> first, wait_first, wait_mid, wait_last, wait_all, comp, ends;
  double waited = 0, cycles = 0, comp_ns = 0;
  for (uint64_t c = 0; c < chunks; ++c) {
    double w = (f(c, kReady) - f(c, kWait)) / 1e6, k = (f(c, kDone) - f(c, kBegin)) / 1e6;
    wait_all.push_back(w);
    (c < uint64_t(grid) ? wait_first : c + grid >= chunks ? wait_last : wait_mid).push_back(w);
    if (c < uint64_t(grid)) first.push_back((f(c, kReady) - t0) / 1e6);
    if (c + grid >= chunks) ends.push_back((f(c, kDone) - t0) / 1e6);
    comp.push_back(k);
    waited += w;
    cycles += f(c, kCycles);
    comp_ns += f(c, kDone) - f(c, kBegin);
  }
  std::printf("trace %s: %.1f ms on the device; first chunk there after %.1f ms (median block; last block %.1f); "
              "blocks waited %.1f%% of their time; tail: last block ends %.1f ms after the median block\n",
              name, span / 1e6, pct(first, 0.5), pct(first, 1.0), 100.0 * waited * 1e6 / (double(grid) * span),
              pct(ends, 1.0) - pct(ends, 0.5));
  std::printf("trace %s: I/O wait per chunk ms p50 %.2f p99 %.2f max %.2f (sum over blocks: first chunks %.0f, "
              "middle %.0f, last %.0f); compute per chunk ms p50 %.2f p99 %.2f max %.2f; SM clock %.0f MHz\n",
              name, pct(wait_all, 0.5), pct(wait_all, 0.99), pct(wait_all, 1.0),
              [&] { double a = 0; for (double x : wait_first) a += x; return a; }(),
              [&] { double a = 0; for (double x : wait_mid) a += x; return a; }(),
              [&] { double a = 0; for (double x : wait_last) a += x; return a; }(),
              pct(comp, 0.5), pct(comp, 0.99), pct(comp, 1.0), comp_ns > 0 ? cycles / comp_ns * 1e3 : 0.0);
  if (!ps.hops.empty()) {
    std::vector<double> eng, sig;
    for (auto& h : ps.hops) eng.push_back(h[1] / 1e6), sig.push_back(h[2] / 1e6);
    std::printf("trace %s: control plane, last %zu requests: engine ms p50 %.2f p99 %.2f, signal ms p50 %.3f p99 %.3f\n",
                name, ps.hops.size(), pct(eng, 0.5), pct(eng, 0.99), pct(sig, 0.5), pct(sig, 0.99));
  }
  std::printf("trace %s | tenth | ms | engine GB/s | engine queue | consumed GB/s | blocks waiting | computing | "
              "reads ahead | SM MHz\n", name);
  const double launch_ns = ps.seconds * 1e9 - span;  // host clock: launch to the first device timestamp, about
  for (int k = 0; k < 10; ++k) {
    const double a = t0 + span * k / 10, b = t0 + span * (k + 1) / 10;
    double used = 0, waiting = 0, computing = 0, ahead = 0, cyc = 0, cns = 0;
    auto overlap = [&](double x, double y) { return std::max(0.0, std::min(y, b) - std::max(x, a)); };
    for (uint64_t c = 0; c < chunks; ++c) {
      if (f(c, kReady) >= a && f(c, kReady) < b) used += double(chunk_bytes);
      waiting += overlap(f(c, kWait), f(c, kReady));
      computing += overlap(f(c, kBegin), f(c, kDone));
      ahead += overlap(f(c, kIssue), f(c, kReady));
      if (f(c, kBegin) >= a && f(c, kBegin) < b) cyc += f(c, kCycles), cns += f(c, kDone) - f(c, kBegin);
    }
    // engine bytes/s in [a, b) and its queue (requests taken from the rings, not yet read: chunks), from the host
    // samples, the device clock shifted by the launch delay
    double eng = -1, queue = 0;
    int nq = 0;
    const double ha = (a - t0 + std::max(0.0, launch_ns)) / 1e9, hb = (b - t0 + std::max(0.0, launch_ns)) / 1e9;
    const Pass::Sample *lo = nullptr, *hi = nullptr;
    for (auto& smp : ps.samples) {
      if (!lo && smp.t >= ha) lo = &smp;
      if (smp.t <= hb) hi = &smp;
      if (smp.t >= ha && smp.t <= hb)
        queue += double(smp.taken) - double(smp.bytes) / double(chunk_bytes), ++nq;
    }
    if (lo && hi && hi->t > lo->t) eng = double(hi->bytes - lo->bytes) / (hi->t - lo->t) / 1e9;
    const double dt = b - a;
    std::printf("trace %s | %d | %.0f | %.2f | %.1f | %.2f | %.1f | %.1f | %.1f | %.0f\n", name, k + 1, (b - t0) / 1e6,
                eng, nq ? queue / nq : -1.0, used / dt, waiting / dt, computing / dt, ahead / dt,
                cns > 0 ? cyc / cns * 1e3 : 0.0);
  }
}

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  if (argc < 2) {
    std::printf("usage: cam_pipeline FILE [chunk_kib=1024] [reps=auto] [rounds=8]\n");
    return 2;
  }
  const char* path = argv[1];
  const uint32_t block_bytes = 4096;
  const uint32_t chunk_blocks = (argc > 2 ? std::atoi(argv[2]) : 1024) * 1024 / block_bytes;
  int reps = argc > 3 ? std::atoi(argv[3]) : 0;
  const int rounds = argc > 4 ? std::atoi(argv[4]) : 8;
  const bool drop = std::getenv("CAM_DROP_CACHES") != nullptr;

  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int grid = prop.multiProcessorCount;  // one persistent block (and queue) per SM
  gpuio::EngineOptions eo;
  eo.paths = {path};
  eo.workers = 2;
  eo.staging_bytes = 256ull << 20;
  eo.staging_slot_bytes = 1u << 20;
  gpuio::GpuOptions go;
  go.queues = grid;
  auto ge = gpuio::GpuEngine::create(eo, go);
  const uint64_t chunks = ge->engine().total_blocks() / chunk_blocks;
  const size_t chunk_bytes = size_t{chunk_blocks} * block_bytes;
  std::printf("device %s, file %s: %llu chunks of %zu KiB, %d blocks x 2 buffers (%.0f MiB of GPU buffers for %.1f GiB)\n",
              prop.name, path, (unsigned long long)chunks, chunk_bytes >> 10, grid,
              2.0 * grid * chunk_bytes / (1 << 20), double(chunks) * chunk_bytes / (1u << 30));

  std::vector<gpuio::QueueRef> qs;
  for (int i = 0; i < grid; ++i) qs.push_back(ge->queue(i));
  Params p{};
  CHECK(cudaMalloc(&p.queues, sizeof(gpuio::QueueRef) * grid));
  CHECK(cudaMemcpy(const_cast<gpuio::QueueRef*>(p.queues), qs.data(), sizeof(gpuio::QueueRef) * grid, cudaMemcpyHostToDevice));
  p.ids = static_cast<int64_t*>(ge->alloc(sizeof(int64_t) * 2 * chunk_blocks * grid));
  p.buffers = static_cast<uint8_t*>(ge->alloc(2 * chunk_bytes * grid));
  p.sums = static_cast<uint32_t*>(ge->alloc(sizeof(uint32_t) * chunks));
  p.err = static_cast<int*>(ge->alloc(sizeof(int)));
  p.trace = nullptr;
  CHECK(cudaMemset(p.err, 0, sizeof(int)));
  CHECK(cudaMemset(p.buffers, 0x5A, 2 * chunk_bytes * grid));
  p.chunks = chunks;
  p.chunk_blocks = chunk_blocks;
  p.block_bytes = block_bytes;
  p.rounds = rounds;
  auto drop_caches = [&] {
    if (!drop) return;
    sync();
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
    if (fd >= 0 && write(fd, "3", 1) != 1) std::printf("warning: drop_caches failed\n");
    if (fd >= 0) close(fd);
  };

  const char* tr = std::getenv("CAM_TRACE");
  const bool trace = !(tr && tr[0] == '0');
  uint64_t* trace_buf = trace ? static_cast<uint64_t*>(ge->alloc(sizeof(uint64_t) * kFields * chunks)) : nullptr;

  // Untimed warm-up, one chunk per block (as the Python twin does): the first kernel, its first requests and
  // the control plane's first wake-ups are not the I/O-alone reference's.
  Params warm = p;
  warm.chunks = std::min<uint64_t>(chunks, grid);
  warm.reps = 1;
  double warm_s = run(warm, grid, kIoOnly, *ge).seconds;
  p.trace = trace_buf;
  drop_caches();
  p.reps = 1;
  Pass io_pass = run(p, grid, kIoOnly, *ge);
  double io = io_pass.seconds;
  if (reps <= 0) {  // calibrate: compute alone about as long as I/O alone (the hardest case to overlap)
    double one = run(p, grid, kComputeOnly, *ge).seconds;
    reps = std::max(1, int(io / one));
  }
  p.reps = reps;
  Pass comp_pass = run(p, grid, kComputeOnly, *ge);
  double comp = comp_pass.seconds;
  drop_caches();
  Pass both_pass = run(p, grid, kPipeline, *ge);
  double both = both_pass.seconds;
  std::printf("warm-up (%d chunks, untimed) %.3f s\n", grid, warm_s);
  report("io-only", io_pass, chunks, grid, chunk_bytes);
  report("compute-only", comp_pass, chunks, grid, chunk_bytes);
  report("pipeline", both_pass, chunks, grid, chunk_bytes);
  int err = 0;
  CHECK(cudaMemcpy(&err, p.err, sizeof(int), cudaMemcpyDeviceToHost));
  std::vector<uint32_t> sums(chunks);
  CHECK(cudaMemcpy(sums.data(), p.sums, sizeof(uint32_t) * chunks, cudaMemcpyDeviceToHost));

  // CPU reference on sampled chunks (all of them when few).
  int fd = open(path, O_RDONLY);
  std::vector<uint32_t> words(chunk_bytes / 4);
  std::mt19937_64 rng(std::random_device{}());
  int checked = 0, bad = 0;
  for (uint64_t k = 0; k < std::min<uint64_t>(chunks, 48); ++k) {
    uint64_t c = chunks <= 48 ? k : rng() % chunks;
    if (pread(fd, words.data(), chunk_bytes, off_t(c * chunk_bytes)) != ssize_t(chunk_bytes)) return 1;
    uint32_t s = 0;
    for (uint32_t w : words) s += word_hash(w, rounds);
    s *= uint32_t(reps);
    ++checked;
    if (s != sums[c]) {
      if (bad++ < 3) std::printf("MISMATCH chunk %llu: gpu %u cpu %u\n", (unsigned long long)c, sums[c], s);
    }
  }
  close(fd);
  double ratio = both / std::max(io, comp);
  std::printf("io_alone_s=%.3f compute_alone_s=%.3f pipeline_s=%.3f ratio_to_max=%.3f reps=%d rounds=%d "
              "io_GBps=%.2f checked_chunks=%d mismatches=%d err=%d\n",
              io, comp, both, ratio, reps, rounds, chunks * chunk_bytes / io / 1e9, checked, bad, err);
  std::printf("%s\n", bad == 0 && err == 0 ? "PASS cam_pipeline" : "FAIL cam_pipeline");
  return bad == 0 && err == 0 ? 0 : 1;
}
