// Device API test (GPU machine; exits 77 = skipped without a GPU, printing why): many thread blocks, each
// on its own queue, prefetch seeded random blocks and compare them with pread; then write_back from GPU
// memory and read the file back; then one-block reads (device_read=auto's landed path) by all thread blocks on
// two shared queues, so landing slots are contended (taken ones fall back to the engine's copy). Usage: test_device_api FILE (created, 64 MiB), or test_device_api
// rbd:POOL/IMAGE (a volume of >= 64 MiB, filled and read back through the engine; CEPH_CONF names the cluster).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "gpuio/device.cuh"
#include "check.cuh"


constexpr uint32_t kBS = 4096, kPerBlock = 40, kBlocks = 24;

__global__ void read_kernel(const gpuio::QueueRef* qs, const int64_t* ids, uint8_t* dst, int* err) {
  gpuio::DeviceQueue q(qs[blockIdx.x]);
  const int64_t* my = ids + blockIdx.x * kPerBlock;
  uint8_t* out = dst + size_t{blockIdx.x} * kPerBlock * kBS;
  q.prefetch(my, 10, out);                        // inline ids
  q.prefetch(my + 10, kPerBlock - 10, out + 10 * kBS);  // ids copied by the control plane
  int e = q.prefetch_synchronize();
  if (threadIdx.x == 0 && e) atomicExch(err, e);
}

__global__ void write_kernel(const gpuio::QueueRef* qs, const int64_t* ids, uint8_t* src, int* err) {
  gpuio::DeviceQueue q(qs[blockIdx.x]);
  uint8_t* mine = src + size_t{blockIdx.x} * kPerBlock * kBS;
  for (uint32_t i = threadIdx.x; i < kPerBlock * kBS; i += blockDim.x) mine[i] = static_cast<uint8_t>(i * 7 + blockIdx.x);
  q.write_back(ids + blockIdx.x * kPerBlock, kPerBlock, mine);
  int e = q.write_back_synchronize();
  if (threadIdx.x == 0 && e) atomicExch(err, e);
}

// Small reads, blocks sharing queues: per step one block alone (landed when its slot is free), then two at once
// (the second, with the first still pending, takes the engine's copy); every byte checked against the file.
constexpr uint32_t kSmallSteps = 20, kSharedQueues = 2;
__global__ void small_read_kernel(const gpuio::QueueRef* qs, const int64_t* ids, uint8_t* dst, int* err) {
  gpuio::DeviceQueue q(qs[blockIdx.x % kSharedQueues]);
  for (uint32_t s = 0; s < kSmallSteps; ++s) {
    const size_t i = (size_t{blockIdx.x} * kSmallSteps + s) * 3;
    q.prefetch(ids + i, 1, dst + i * kBS);
    int e = q.prefetch_synchronize();
    q.prefetch(ids + i + 1, 1, dst + (i + 1) * kBS);
    q.prefetch(ids + i + 2, 1, dst + (i + 2) * kBS);
    e = e ? e : q.prefetch_synchronize();
    if (threadIdx.x == 0 && e) atomicExch(err, e);
  }
}

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 77;
  }
  const char* path = argc > 1 ? argv[1] : "device_api_test.bin";
  const bool volume = std::strncmp(path, "rbd:", 4) == 0;
  const uint64_t nblocks = (64u << 20) / kBS;
  std::vector<uint8_t> file(nblocks * kBS);
  unsigned seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  for (auto& b : file) b = static_cast<uint8_t>(rng());
  if (!volume) {
    int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
    if (fd < 0 || write(fd, file.data(), file.size()) != static_cast<ssize_t>(file.size())) return 1;
    close(fd);
  }

  gpuio::EngineOptions eo;
  eo.paths = {path};
  eo.workers = 2;
  if (volume) eo.backend.kind = "rbd";
  gpuio::GpuOptions go;
  go.queues = kBlocks;
  auto ge = gpuio::GpuEngine::create(eo, go);
  std::vector<int64_t> all(nblocks);
  for (uint64_t i = 0; i < nblocks; ++i) all[i] = static_cast<int64_t>(i);
  if (volume) ge->engine().write(all.data(), all.size(), file.data());
  std::vector<gpuio::QueueRef> qs;
  for (uint32_t i = 0; i < kBlocks; ++i) qs.push_back(ge->queue(i));
  std::vector<int64_t> ids(kBlocks * kPerBlock);
  for (auto& id : ids) id = static_cast<int64_t>(rng() % nblocks);
  gpuio::QueueRef* dqs;
  int64_t* dids;
  int* derr;
  auto* buf = static_cast<uint8_t*>(ge->alloc(ids.size() * kBS));
  CHECK(cudaMalloc(&dqs, sizeof(gpuio::QueueRef) * kBlocks));
  CHECK(cudaMalloc(&dids, ids.size() * 8));
  CHECK(cudaMalloc(&derr, sizeof(int)));
  CHECK(cudaMemcpy(dqs, qs.data(), sizeof(gpuio::QueueRef) * kBlocks, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dids, ids.data(), ids.size() * 8, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(derr, 0, sizeof(int)));
  CHECK(cudaMemset(buf, 0xEE, ids.size() * kBS));
  read_kernel<<<kBlocks, 128>>>(dqs, dids, buf, derr);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  int err = 0;
  CHECK(cudaMemcpy(&err, derr, sizeof(int), cudaMemcpyDeviceToHost));
  std::vector<uint8_t> got(ids.size() * kBS);
  CHECK(cudaMemcpy(got.data(), buf, got.size(), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (err || std::memcmp(&got[i * kBS], &file[ids[i] * kBS], kBS) != 0) {
      std::printf("FAIL read: seed=%u index %zu block %lld err=%d\n", seed, i, (long long)ids[i], err);
      return 1;
    }
  }
  // write_back: distinct blocks per thread block so the expected content is defined
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 3);
  CHECK(cudaMemcpy(dids, ids.data(), ids.size() * 8, cudaMemcpyHostToDevice));
  write_kernel<<<kBlocks, 128>>>(dqs, dids, buf, derr);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(&err, derr, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(got.data(), buf, got.size(), cudaMemcpyDeviceToHost));
  ge->engine().sync();
  int fd = volume ? -1 : open(path, O_RDONLY);
  std::vector<uint8_t> blk(kBS);
  for (size_t i = 0; i < ids.size(); ++i) {
    bool ok;
    if (volume) {
      ge->engine().read(&ids[i], 1, blk.data());
      ok = true;
    } else {
      ok = pread(fd, blk.data(), kBS, ids[i] * kBS) == kBS;
    }
    if (!ok || err || std::memcmp(blk.data(), &got[i * kBS], kBS) != 0) {
      std::printf("FAIL write_back: index %zu block %lld err=%d\n", i, (long long)ids[i], err);
      return 1;
    }
  }
  if (fd >= 0) close(fd);
  // Small reads on shared queues (the file holds the written blocks now: compare with a fresh read of it).
  std::vector<int64_t> small(size_t{kBlocks} * kSmallSteps * 3);
  for (auto& id : small) id = static_cast<int64_t>(rng() % nblocks);
  int64_t* dsmall;
  CHECK(cudaMalloc(&dsmall, small.size() * 8));
  CHECK(cudaMemcpy(dsmall, small.data(), small.size() * 8, cudaMemcpyHostToDevice));
  auto* sbuf = static_cast<uint8_t*>(ge->alloc(small.size() * kBS));
  CHECK(cudaMemset(sbuf, 0xEE, small.size() * kBS));
  const auto before = ge->runtime().stats();
  small_read_kernel<<<kBlocks, 128>>>(dqs, dsmall, sbuf, derr);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(&err, derr, sizeof(int), cudaMemcpyDeviceToHost));
  std::vector<uint8_t> sgot(small.size() * kBS), want(small.size() * kBS);
  CHECK(cudaMemcpy(sgot.data(), sbuf, sgot.size(), cudaMemcpyDeviceToHost));
  ge->engine().read(small.data(), small.size(), want.data());
  const auto after = ge->runtime().stats();
  const uint64_t landed = after.landed_requests - before.landed_requests;
  const uint64_t copied = after.device_requests - before.device_requests;
  for (size_t i = 0; i < small.size(); ++i) {
    if (err || std::memcmp(&sgot[i * kBS], &want[i * kBS], kBS) != 0) {
      std::printf("FAIL small read: seed=%u index %zu block %lld err=%d (landed %llu, engine-copied %llu)\n", seed, i,
                  (long long)small[i], err, (unsigned long long)landed, (unsigned long long)copied);
      return 1;
    }
  }
  if (landed == 0 || copied == 0 || landed + copied != small.size()) {
    std::printf("FAIL small read paths: landed %llu + engine-copied %llu, expected both > 0 summing to %zu\n",
                (unsigned long long)landed, (unsigned long long)copied, small.size());
    return 1;
  }
  cudaFree(dsmall);
  ge->free(sbuf);
  auto st = ge->runtime().stats();
  std::printf("PASS device API on %s: %u blocks x %u reads + writes, seed=%u, requests=%llu copy=%s; %u blocks on %u "
              "queues x %u small steps: landed %llu, engine-copied %llu (%s)\n", path, kBlocks, kPerBlock, seed,
              (unsigned long long)st.gpu_requests, st.copy_mode.c_str(), kBlocks, kSharedQueues, kSmallSteps,
              (unsigned long long)landed, (unsigned long long)copied, st.device_read_mode.c_str());
  ge->free(buf);
  return 0;
}
