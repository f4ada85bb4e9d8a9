// CAM Fig. 7 pattern: a persistent kernel where each thread block loops
//     prefetch_synchronize()  -> the current chunk is in GPU memory
//     prefetch(next chunk)    -> returns at once; CPU workers read it while the GPU computes
//     compute on the current chunk
// over a file much larger than the GPU buffers (two chunk buffers per block). The same kernel also runs
// with I/O only and with compute only; the pipeline should take about max(I/O, compute), not the sum.
// Compute per 4-byte word: `rounds` steps of an integer hash, repeated `reps` times over the chunk (volatile
// loads, so each rep reads memory); the per-chunk sums are checked against a CPU reference on sampled chunks.
// Usage: cam_pipeline FILE [chunk_kib=1024] [reps=auto] [rounds=8]
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
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

struct Params {
  const gpuio::QueueRef* queues;
  int64_t* ids;        // 2 x chunk_blocks per thread block
  uint8_t* buffers;    // 2 x chunk_bytes per thread block
  uint32_t* sums;      // one per chunk
  uint64_t chunks;
  uint32_t chunk_blocks, block_bytes;
  int reps, rounds, mode;
  int* err;
};

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
  }
  for (; c < p.chunks; c += gridDim.x) {
    if (io) {
      int e = q.prefetch_synchronize();
      if (e && threadIdx.x == 0) atomicExch(p.err, e);
      uint64_t next = c + gridDim.x;
      if (next < p.chunks) {
        fill_ids(p, ids[cur ^ 1], next);
        q.prefetch(ids[cur ^ 1], p.chunk_blocks, buf[cur ^ 1]);
      }
    }
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
    __syncthreads();  // every thread done with buf[cur] before it is refilled next round
    cur ^= 1;
  }
}

static double run(Params p, int grid, int mode) {
  p.mode = mode;
  auto t0 = std::chrono::steady_clock::now();
  pipeline<<<grid, 512>>>(p);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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

  drop_caches();
  p.reps = 1;
  double io = run(p, grid, kIoOnly);
  if (reps <= 0) {  // calibrate: compute alone about as long as I/O alone (the hardest case to overlap)
    double one = run(p, grid, kComputeOnly);
    reps = std::max(1, int(io / one));
  }
  p.reps = reps;
  double comp = run(p, grid, kComputeOnly);
  drop_caches();
  double both = run(p, grid, kPipeline);
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
