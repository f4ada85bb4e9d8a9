// Device-array test (GPU machine; exits 77 = skipped without a GPU): a user kernel reads a[i] through
// gpuio::DeviceArray<int32_t> (random and sequential, a cache of 1/8 of the working set), then a second kernel
// does a[j] = 2 * a[j] + 1 on a permutation's first half (dirty pages evicted and written back), flush(),
// and the file is compared with the host reference by pread. Usage: test_device_array FILE (created, 32 MiB)
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "gpuio/array.cuh"
#include "check.cuh"


constexpr uint32_t kBS = 4096;
constexpr uint64_t kElems = (32u << 20) / 4;  // int32, from block 1 on (block 0 plays the header)

__global__ void read_kernel(gpuio::ArrayRef r, const int64_t* idx, uint64_t n, int32_t* out) {
  gpuio::DeviceArray<int32_t> a(r);
  for (uint64_t j = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; j < n; j += uint64_t{gridDim.x} * blockDim.x)
    out[j] = a[idx[j]];
}

__global__ void update_kernel(gpuio::ArrayRef r, const int64_t* idx, uint64_t n) {
  gpuio::DeviceArray<int32_t> a(r);
  for (uint64_t j = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; j < n; j += uint64_t{gridDim.x} * blockDim.x) {
    const int32_t v = a[idx[j]];  // distinct indices: no two lanes touch one element
    a.write(idx[j], 2 * v + 1);
  }
}

static int run_reads(gpuio::GpuArrayCache& c, const std::vector<int64_t>& idx, const std::vector<int32_t>& ref,
                     const char* what) {
  int64_t* d_idx;
  int32_t* d_out;
  CHECK(cudaMalloc(&d_idx, idx.size() * 8));
  CHECK(cudaMalloc(&d_out, idx.size() * 4));
  CHECK(cudaMemcpy(d_idx, idx.data(), idx.size() * 8, cudaMemcpyHostToDevice));
  read_kernel<<<264, 256>>>(c.ref(), d_idx, idx.size(), d_out);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<int32_t> got(idx.size());
  CHECK(cudaMemcpy(got.data(), d_out, got.size() * 4, cudaMemcpyDeviceToHost));
  cudaFree(d_idx);
  cudaFree(d_out);
  if (c.error()) {
    std::printf("FAIL %s: error word %d\n", what, c.error());
    return 1;
  }
  for (size_t j = 0; j < idx.size(); ++j)
    if (got[j] != ref[idx[j]]) {
      std::printf("FAIL %s: position %zu element %lld got %d want %d\n", what, j, (long long)idx[j], got[j],
                  ref[idx[j]]);
      return 1;
    }
  return 0;
}

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  const char* path = argc > 1 ? argv[1] : "device_array_test.bin";
  unsigned seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ref(kElems);
  for (auto& v : ref) v = static_cast<int32_t>(rng() >> 33);
  int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
  std::vector<uint8_t> head(kBS, 0);
  if (fd < 0 || write(fd, head.data(), kBS) != kBS ||
      write(fd, ref.data(), kElems * 4) != static_cast<ssize_t>(kElems * 4))
    return 1;
  close(fd);

  gpuio::EngineOptions eo;
  eo.paths = {path};
  eo.workers = 2;
  auto ge = gpuio::GpuEngine::create(eo);
  std::vector<gpuio::QueueRef> qs;
  for (uint32_t i = 0; i < ge->runtime().queue_count(); ++i) qs.push_back(ge->queue(i));
  gpuio::CacheGeometry g;
  g.n_elems = kElems;
  g.elem_bytes = 4;
  g.page_bytes = kBS;
  g.block_bytes = kBS;
  g.base_block = 1;
  g.ways = 8;
  g.sets = (kElems * 4 / kBS) / 8 / g.ways;  // an eighth of the pages
  gpuio::GpuArrayCache c(ge->engine(), qs, g, 64);

  std::vector<int64_t> seq(kElems);
  std::iota(seq.begin(), seq.end(), 0);
  if (run_reads(c, seq, ref, "sequential")) return 1;
  auto k = c.counters();
  const uint64_t pages = kElems * 4 / kBS;
  if (k.hits + k.misses != kElems || k.page_reads < pages) {
    std::printf("FAIL counters after the scan: hits %llu misses %llu page_reads %llu (pages %llu)\n",
                (unsigned long long)k.hits, (unsigned long long)k.misses, (unsigned long long)k.page_reads,
                (unsigned long long)pages);
    return 1;
  }
  std::printf("sequential: hits %llu misses %llu page_reads %llu evictions %llu requests %llu\n",
              (unsigned long long)k.hits, (unsigned long long)k.misses, (unsigned long long)k.page_reads,
              (unsigned long long)k.evictions, (unsigned long long)k.requests);
  std::vector<int64_t> rnd(1 << 20);
  for (auto& i : rnd) i = static_cast<int64_t>(rng() % kElems);
  if (run_reads(c, rnd, ref, "random")) return 1;

  std::vector<int64_t> perm(kElems);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  perm.resize(kElems / 2);
  for (int64_t i : perm) ref[i] = 2 * ref[i] + 1;
  int64_t* d_perm;
  CHECK(cudaMalloc(&d_perm, perm.size() * 8));
  CHECK(cudaMemcpy(d_perm, perm.data(), perm.size() * 8, cudaMemcpyHostToDevice));
  update_kernel<<<264, 256>>>(c.ref(), d_perm, perm.size());
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  cudaFree(d_perm);
  if (run_reads(c, seq, ref, "read after update")) return 1;
  c.flush();
  ge->engine().sync();
  fd = open(path, O_RDONLY);
  std::vector<int32_t> back(kElems);
  if (pread(fd, back.data(), kElems * 4, kBS) != static_cast<ssize_t>(kElems * 4)) return 1;
  close(fd);
  for (uint64_t i = 0; i < kElems; ++i)
    if (back[i] != ref[i]) {
      std::printf("FAIL file after flush: element %llu got %d want %d (seed=%u)\n", (unsigned long long)i, back[i],
                  ref[i], seed);
      return 1;
    }
  k = c.counters();
  std::printf("PASS device array: %llu int32, cache 1/8, seed=%u, hits %llu misses %llu page_writes %llu\n",
              (unsigned long long)kElems, seed, (unsigned long long)k.hits, (unsigned long long)k.misses,
              (unsigned long long)k.page_writes);
  return 0;
}
