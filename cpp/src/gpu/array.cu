// GpuArrayCache: the host-side owner of a BaM-style device array's GPU page cache (array_cache.hpp), and the
// gather/scatter kernels that run every access through gpuio::DeviceArray<T> (array.cuh).
#include <cuda_runtime.h>

#include <cerrno>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/pinned_pool.hpp"
#include "gpu/cuda_check.hpp"
#include "gpuio/array.cuh"

namespace gpuio {

namespace {

constexpr uint32_t threads_per_block = 256;

template <class T>
__global__ void gather_kernel(ArrayRef r, const int64_t* idx, uint64_t n, T* out) {
  DeviceArray<T> a(r);
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  // Whole warps run every iteration (the tail's lanes sit out together), so a warp's lanes access together.
  const uint64_t rounds = (n + stride - 1) / stride;
  for (uint64_t k = 0; k < rounds; ++k) {
    const uint64_t j = k * stride + uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
    if (j < n) out[j] = a[static_cast<uint64_t>(idx[j])];
  }
}

template <class T>
__global__ void scatter_kernel(ArrayRef r, const int64_t* idx, uint64_t n, const T* vals) {
  DeviceArray<T> a(r);
  const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
  const uint64_t rounds = (n + stride - 1) / stride;
  for (uint64_t k = 0; k < rounds; ++k) {
    const uint64_t j = k * stride + uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
    if (j < n) a.write(static_cast<uint64_t>(idx[j]), vals[j]);
  }
}

template <class F>
void by_elem_bytes(uint32_t bytes, F f) {
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: throw std::invalid_argument("elem_bytes=" + std::to_string(bytes) + " must be 1, 2, 4 or 8");
  }
}

template <class P>
void device_alloc(P*& p, size_t count) {
  void* v = nullptr;
  GPUIO_CUDA(cudaMalloc(&v, count * sizeof(P)));
  p = static_cast<P*>(v);
}

uint32_t grid_for(uint64_t n) {
  int dev = 0, sms = 0;
  GPUIO_CUDA(cudaGetDevice(&dev));
  GPUIO_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const uint64_t want = (n + threads_per_block - 1) / threads_per_block;
  const uint64_t cap = uint64_t(sms) * 8;  // resident blocks: enough warps to keep misses in flight
  return static_cast<uint32_t>(want < cap ? (want ? want : 1) : cap);
}

}  // namespace

GpuArrayCache::GpuArrayCache(Engine& engine, const std::vector<QueueRef>& queues, const CacheGeometry& g,
                             uint32_t staging_groups)
    : eng_(engine) {
  g.validate(engine.total_blocks());
  if (g.block_bytes != engine.options().block_size)
    throw std::invalid_argument("block_bytes=" + std::to_string(g.block_bytes) + " differs from the engine's " +
                                std::to_string(engine.options().block_size));
  if (staging_groups == 0) throw std::invalid_argument("staging_groups=0 must be >= 1");
  if (queues.empty()) throw std::invalid_argument("queues is empty: give the GPU runtime's device-API queues");
  ref_.g = g;
  const uint64_t slots = g.slots();
  const uint32_t lanes = g.round_pages;
  try {
    device_alloc(ref_.pages, slots * g.page_bytes);
    device_alloc(ref_.tags, slots);
    device_alloc(ref_.ref, slots);
    device_alloc(ref_.dirty, slots);
    device_alloc(ref_.hands, g.sets);
    device_alloc(ref_.locks, g.sets);
    device_alloc(ref_.group_ids, uint64_t{staging_groups} * lanes * g.blocks_per_page());
    device_alloc(ref_.group_locks, staging_groups);
    device_alloc(ref_.counters, uint64_t{array_limits::counter_shards} * array_limits::counter_words);
    device_alloc(ref_.error, 1);
    device_alloc(ref_.queues, queues.size());
    staging_ = detail::PinnedBlock::take(uint64_t{staging_groups} * lanes * g.page_bytes, false,
                                         detail::PinnedReuse::owned, "array_staging");
    std::string why;
    if (!staging_->register_now(&why)) throw std::runtime_error("cannot page-lock the device array's staging: " + why);
    ref_.staging_host = staging_->data();
    void* dev = nullptr;
    GPUIO_CUDA(cudaHostGetDevicePointer(&dev, staging_->data(), 0));
    ref_.staging_dev = static_cast<uint8_t*>(dev);
    ref_.groups = staging_groups;
    GPUIO_CUDA(cudaMemcpy(ref_.queues, queues.data(), queues.size() * sizeof(QueueRef), cudaMemcpyHostToDevice));
    ref_.queue_count = static_cast<uint32_t>(queues.size());
    GPUIO_CUDA(cudaMemset(ref_.locks, 0, g.sets * sizeof(uint32_t)));
    GPUIO_CUDA(cudaMemset(ref_.group_locks, 0, staging_groups * sizeof(uint32_t)));
    GPUIO_CUDA(cudaMemset(ref_.error, 0, sizeof(int32_t)));
    invalidate();
    reset_counters();
    // Load the kernels now: a lazy module load at the first launch would synchronise the context while
    // another kernel may be waiting on the engine.
    by_elem_bytes(g.elem_bytes, [](auto t) {
      using T = decltype(t);
      cudaFuncAttributes a{};
      GPUIO_CUDA(cudaFuncGetAttributes(&a, gather_kernel<T>));
      GPUIO_CUDA(cudaFuncGetAttributes(&a, scatter_kernel<T>));
    });
  } catch (...) {
    release();
    throw;
  }
}

GpuArrayCache::~GpuArrayCache() { release(); }

void GpuArrayCache::release() {
  void* ptrs[] = {ref_.pages, ref_.tags, ref_.ref, ref_.dirty, ref_.hands, ref_.locks, ref_.group_ids,
                  ref_.group_locks, ref_.counters, ref_.error, ref_.queues};
  for (void* p : ptrs)
    if (p) cudaFree(p);
  staging_.reset();
  ref_ = ArrayRef{};
}

void GpuArrayCache::gather(const int64_t* idx, uint64_t n, void* out, void* stream) {
  if (n == 0) return;
  by_elem_bytes(ref_.g.elem_bytes, [&](auto t) {
    using T = decltype(t);
    gather_kernel<T><<<grid_for(n), threads_per_block, 0, static_cast<cudaStream_t>(stream)>>>(
        ref_, idx, n, static_cast<T*>(out));
  });
  GPUIO_CUDA(cudaGetLastError());
}

void GpuArrayCache::scatter(const int64_t* idx, uint64_t n, const void* vals, void* stream) {
  if (n == 0) return;
  by_elem_bytes(ref_.g.elem_bytes, [&](auto t) {
    using T = decltype(t);
    scatter_kernel<T><<<grid_for(n), threads_per_block, 0, static_cast<cudaStream_t>(stream)>>>(
        ref_, idx, n, static_cast<const T*>(vals));
  });
  GPUIO_CUDA(cudaGetLastError());
}

void GpuArrayCache::flush() {
  GPUIO_CUDA(cudaDeviceSynchronize());
  const uint64_t slots = ref_.g.slots();
  const uint32_t pb = ref_.g.page_bytes, bpp = ref_.g.blocks_per_page();
  std::vector<int64_t> tags(slots);
  std::vector<uint8_t> dirty(slots);
  GPUIO_CUDA(cudaMemcpy(tags.data(), ref_.tags, slots * 8, cudaMemcpyDeviceToHost));
  GPUIO_CUDA(cudaMemcpy(dirty.data(), ref_.dirty, slots, cudaMemcpyDeviceToHost));
  // In chunks of the staging memory (host-mapped, idle between kernels): device -> staging -> engine write.
  const uint64_t chunk = uint64_t{ref_.groups} * ref_.g.round_pages;
  std::vector<int64_t> ids;
  std::vector<uint64_t> batch;
  uint64_t written = 0;
  auto write_batch = [&] {
    if (batch.empty()) return;
    ids.clear();
    for (size_t k = 0; k < batch.size(); ++k) {
      GPUIO_CUDA(cudaMemcpy(ref_.staging_host + k * pb, ref_.pages + batch[k] * pb, pb, cudaMemcpyDeviceToHost));
      for (uint32_t b = 0; b < bpp; ++b) ids.push_back(ref_.g.first_block(tags[batch[k]]) + b);
    }
    eng_.write(ids.data(), ids.size(), ref_.staging_host);
    for (uint64_t s : batch) GPUIO_CUDA(cudaMemset(ref_.dirty + s, 0, 1));
    written += batch.size();
    batch.clear();
  };
  for (uint64_t s = 0; s < slots; ++s) {
    if (!dirty[s] || tags[s] < 0) continue;
    batch.push_back(s);
    if (batch.size() == chunk) write_batch();
  }
  write_batch();
  if (written) {
    // Counted in shard 0 like a kernel's write-backs.
    unsigned long long c[array_limits::counter_words];
    GPUIO_CUDA(cudaMemcpy(c, ref_.counters, sizeof(c), cudaMemcpyDeviceToHost));
    c[ac_page_writes] += written;
    c[ac_requests] += (written + chunk - 1) / chunk;
    GPUIO_CUDA(cudaMemcpy(ref_.counters, c, sizeof(c), cudaMemcpyHostToDevice));
  }
}

void GpuArrayCache::invalidate() {
  GPUIO_CUDA(cudaDeviceSynchronize());
  const uint64_t slots = ref_.g.slots();
  GPUIO_CUDA(cudaMemset(ref_.tags, 0xff, slots * sizeof(int64_t)));  // -1: empty
  GPUIO_CUDA(cudaMemset(ref_.ref, 0, slots));
  GPUIO_CUDA(cudaMemset(ref_.dirty, 0, slots));
  GPUIO_CUDA(cudaMemset(ref_.hands, 0, ref_.g.sets * sizeof(uint32_t)));
}

ArrayCounters GpuArrayCache::counters() const {
  std::vector<unsigned long long> c(uint64_t{array_limits::counter_shards} * array_limits::counter_words);
  GPUIO_CUDA(cudaMemcpy(c.data(), ref_.counters, c.size() * sizeof(c[0]), cudaMemcpyDeviceToHost));
  uint64_t sum[array_limits::counter_words] = {};
  for (size_t k = 0; k < c.size(); ++k) sum[k % array_limits::counter_words] += c[k];
  ArrayCounters out;
  out.hits = sum[ac_hits];
  out.misses = sum[ac_misses];
  out.page_reads = sum[ac_page_reads];
  out.page_writes = sum[ac_page_writes];
  out.evictions = sum[ac_evictions];
  out.requests = sum[ac_requests];
  return out;
}

void GpuArrayCache::reset_counters() {
  GPUIO_CUDA(cudaMemset(ref_.counters, 0,
                        uint64_t{array_limits::counter_shards} * array_limits::counter_words * sizeof(unsigned long long)));
}

int GpuArrayCache::error() const {
  int32_t e = 0;
  GPUIO_CUDA(cudaMemcpy(&e, ref_.error, sizeof(e), cudaMemcpyDeviceToHost));
  return e;
}

void GpuArrayCache::clear_error() { GPUIO_CUDA(cudaMemset(ref_.error, 0, sizeof(int32_t))); }

std::vector<int64_t> GpuArrayCache::tags() const {
  std::vector<int64_t> t(ref_.g.slots());
  GPUIO_CUDA(cudaMemcpy(t.data(), ref_.tags, t.size() * 8, cudaMemcpyDeviceToHost));
  return t;
}

}  // namespace gpuio
