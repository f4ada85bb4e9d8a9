// Measurement helpers the benchmarks call: the GPU-initiated one-block read latency probe, and CAM's
// CPU-managed baseline (pread + cudaMemcpy per block).
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "gpu/cuda_check.hpp"
#include "gpu/host_alloc.hpp"
#include "gpuio/device.cuh"
#include "gpuio/status.hpp"

namespace gpuio::gpu {

namespace {

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// ns[i]: the whole round trip of read i; ns[iters + i]: its publish alone (slot wait, request fields and ids over
// PCIe into the host-mapped ring, the system fence, the doorbell); ns[2 * iters + i]: publish end -> the leader
// seeing done (doorbell to the CPU, control plane, engine, done word back); the rest is the data's copy by the
// block (landed reads) or nothing (the engine copied before done).
// landing (optional): host-mapped memory of 64 slots; the reads land there and the block copies them to dst
// (DeviceQueue::prefetch_landed). Without it, DeviceQueue::prefetch: the runtime's device_read decides.
__global__ void latency_kernel(QueueRef q, const int64_t* ids, uint32_t iters, uint8_t* dst, uint32_t block_bytes,
                               uint8_t* landing, int64_t* ns, int* err) {
  DeviceQueue dq(q);
  for (uint32_t i = 0; i < iters; ++i) {
    uint64_t t0 = global_ns();
    const size_t slot = static_cast<size_t>(i % 64) * block_bytes;
    if (landing) {
      dq.prefetch_landed(ids + i, 1, dst + slot, landing + slot, block_bytes);
    } else {
      dq.prefetch(ids + i, 1, dst + slot);
    }
    uint64_t tp = global_ns();
    int e = dq.prefetch_synchronize();
    uint64_t t1 = global_ns();
    if (threadIdx.x == 0) {
      ns[i] = static_cast<int64_t>(t1 - t0);
      ns[iters + i] = static_cast<int64_t>(tp - t0);
      ns[2 * iters + i] = static_cast<int64_t>(dq.done_seen_ns() - tp);
      if (e && !*err) *err = e;
    }
  }
}

}  // namespace

void latency_probe(QueueRef q, const int64_t* ids_host, uint32_t iters, void* dst_device, std::vector<int64_t>& ns,
                   std::vector<int64_t>* publish_ns, bool landed, std::vector<int64_t>* wait_ns) {
  uint8_t* landing = nullptr;  // host-mapped: under UVA the same address on both sides
  if (landed) {
    GPUIO_CUDA(detail::host_alloc(reinterpret_cast<void**>(&landing), 64 * 4096, cudaHostAllocMapped, "probe"));
  }
  int64_t* ids = nullptr;
  int64_t* out = nullptr;
  int* err = nullptr;
  GPUIO_CUDA(cudaMalloc(&ids, sizeof(int64_t) * iters));
  GPUIO_CUDA(cudaMalloc(&out, sizeof(int64_t) * 3 * iters));
  GPUIO_CUDA(cudaMalloc(&err, sizeof(int)));
  GPUIO_CUDA(cudaMemcpy(ids, ids_host, sizeof(int64_t) * iters, cudaMemcpyHostToDevice));
  GPUIO_CUDA(cudaMemset(err, 0, sizeof(int)));
  cudaStream_t s;
  GPUIO_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // block_bytes is not known here: 4 KiB slots of dst, 64 of them, reused round-robin.
  latency_kernel<<<1, 32, 0, s>>>(q, ids, iters, static_cast<uint8_t*>(dst_device), 4096, landing, out, err);
  GPUIO_CUDA(cudaGetLastError());
  GPUIO_CUDA(cudaStreamSynchronize(s));
  ns.resize(3 * size_t{iters});
  int e = 0;
  GPUIO_CUDA(cudaMemcpy(ns.data(), out, sizeof(int64_t) * 3 * iters, cudaMemcpyDeviceToHost));
  if (publish_ns) publish_ns->assign(ns.begin() + iters, ns.begin() + 2 * size_t{iters});
  if (wait_ns) wait_ns->assign(ns.begin() + 2 * size_t{iters}, ns.end());
  ns.resize(iters);
  GPUIO_CUDA(cudaMemcpy(&e, err, sizeof(int), cudaMemcpyDeviceToHost));
  cudaStreamDestroy(s);
  cudaFree(ids);
  cudaFree(out);
  cudaFree(err);
  detail::host_free(landing);
  if (e) throw IoError(e, "latency probe: a GPU-initiated read failed: " + detail::errno_name(e));
}

double pread_memcpy_baseline(const std::string& path, const int64_t* ids, size_t n, uint32_t block_bytes,
                             void* dst_device, uint32_t threads) {
  GPUIO_EXPECT(threads >= 1 && threads <= 256, "threads=" + std::to_string(threads) + " must lie in [1, 256]");
  int dev = 0;
  GPUIO_CUDA(cudaGetDevice(&dev));
  std::atomic<size_t> next{0};
  std::atomic<int> failed{0};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      cudaSetDevice(dev);
      int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
      void* bounce = nullptr;
      if (fd < 0 || detail::host_alloc(&bounce, block_bytes, cudaHostAllocDefault, "probe") != cudaSuccess) {
        failed.store(fd < 0 ? errno : ENOMEM);
        if (fd >= 0) ::close(fd);
        return;
      }
      for (size_t i; (i = next.fetch_add(1)) < n && !failed.load();) {
        ssize_t r = pread(fd, bounce, block_bytes, static_cast<off_t>(ids[i]) * block_bytes);
        if (r != static_cast<ssize_t>(block_bytes) ||
            cudaMemcpy(static_cast<uint8_t*>(dst_device) + i * block_bytes, bounce, block_bytes,
                       cudaMemcpyHostToDevice) != cudaSuccess) {
          failed.store(r < 0 ? errno : EIO);
        }
      }
      detail::host_free(bounce);
      ::close(fd);
    });
  }
  for (auto& th : pool) th.join();
  if (failed.load()) throw IoError(failed.load(), "pread+cudaMemcpy baseline failed on '" + path + "'");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace gpuio::gpu
