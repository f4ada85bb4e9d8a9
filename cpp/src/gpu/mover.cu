#include "gpu/mover.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <stdexcept>

#include "gpu/cuda_check.hpp"
#include "gpu/host_alloc.hpp"
#include "gpuio/limits.hpp"

namespace gpuio::detail {

namespace {

constexpr uint32_t kernel_runs_max = 1024;  // runs per gather launch (descriptor buffer size)
constexpr uint32_t large_run_bytes = 64u << 10;  // groups averaging this per run go by copy engine

// One thread block per run; 16-byte accesses (runs are multiples of the 512-byte block, staging and
// cudaMalloc memory are 256-byte aligned, so every run is 16-byte aligned).
__global__ void gather_kernel(const CopyRun* runs) {
  CopyRun r = runs[blockIdx.x];
  if (((reinterpret_cast<uintptr_t>(r.src) | reinterpret_cast<uintptr_t>(r.dst)) & 15) != 0) {
    const uint8_t* s = static_cast<const uint8_t*>(r.src);  // a destination tensor at an odd offset
    uint8_t* d = static_cast<uint8_t*>(r.dst);
    for (uint32_t i = threadIdx.x; i < r.len; i += blockDim.x) d[i] = s[i];
    return;
  }
  const uint4* s = static_cast<const uint4*>(r.src);
  uint4* d = static_cast<uint4*>(r.dst);
  for (uint32_t i = threadIdx.x; i < r.len / 16; i += blockDim.x) d[i] = s[i];
}

}  // namespace

const char* copy_mode_name(CopyMode m) {
  switch (m) {
    case CopyMode::batch: return "batch";
    case CopyMode::percopy: return "percopy";
    case CopyMode::kernel: return "kernel";
  }
  return "?";
}

CopyMode parse_copy_mode(const std::string& s) {
  if (s == "batch") return CopyMode::batch;
  if (s == "percopy") return CopyMode::percopy;
  if (s == "kernel") return CopyMode::kernel;
  throw std::invalid_argument("copy='" + s + "' is not one of auto, batch, percopy, kernel");
}

struct CudaMover::PerWorker {
  bool ready = false;
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;  // ring, indexed by ticket % size
  uint64_t next_ticket = 1;         // ticket the next flush returns
  uint64_t completed = 0;           // every ticket <= completed is done
  int sticky_error = 0;             // a failed launch fails every later ticket of this worker
  std::vector<CopyRun> runs;
  std::vector<void*> dsts;
  std::vector<const void*> srcs;
  std::vector<size_t> sizes;
  CopyRun* descriptors = nullptr;   // pinned, kernel mode: one slice per ring event
};

CudaMover::CudaMover(int device, FixedBuffer staging, CopyMode mode)
    : device_(device), staging_(staging), mode_(mode) {
  void* dev = nullptr;
  GPUIO_CUDA(cudaHostGetDevicePointer(&dev, staging.base, 0));
  staging_dev_ = static_cast<uint8_t*>(dev);
  workers_.resize(limits::workers_max + 1);  // the last slot is for measure()
  // Load the gather kernel now. With lazy module loading (CUDA's default since 12.2) its first launch may
  // need a context synchronisation; if a stream-ordered wait kernel is spinning on the GPU at that moment
  // (it waits for exactly this copy), that synchronisation never ends: a deadlock seen on the H200 in
  // test_random_blocks_into_gpu_match_host[kernel-kernel]. cudaFuncGetAttributes loads the function.
  cudaFuncAttributes attr{};
  GPUIO_CUDA(cudaFuncGetAttributes(&attr, gather_kernel));
}

CudaMover::~CudaMover() {
  for (auto& w : workers_) {
    if (!w || !w->ready) continue;
    cudaStreamSynchronize(w->stream);
    for (cudaEvent_t e : w->events) cudaEventDestroy(e);
    cudaStreamDestroy(w->stream);
    host_free(w->descriptors);
  }
}

CudaMover::PerWorker& CudaMover::state(uint32_t worker) {
  auto& slot = workers_.at(worker);
  if (!slot) slot = std::make_unique<PerWorker>();
  PerWorker& w = *slot;
  if (!w.ready) {  // first use, on the worker's own thread
    GPUIO_CUDA(cudaSetDevice(device_));
    GPUIO_CUDA(cudaStreamCreateWithFlags(&w.stream, cudaStreamNonBlocking));
    w.events.resize(gpu_limits::copy_events_max);
    for (auto& e : w.events) GPUIO_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    GPUIO_CUDA(host_alloc(reinterpret_cast<void**>(&w.descriptors),
                          sizeof(CopyRun) * kernel_runs_max * gpu_limits::copy_events_max, cudaHostAllocMapped,
                          "copy_descriptors"));
    w.ready = true;
  }
  return w;
}

void CudaMover::stage_out(uint32_t worker, void* dst, const void* staging, uint32_t len) {
  PerWorker& w = state(worker);
  const uint8_t* s = static_cast<const uint8_t*>(staging);
  w.runs.push_back({dst, staging_dev_ + (s - static_cast<const uint8_t*>(staging_.base)), len});
}

cudaError_t CudaMover::launch(PerWorker& w) {
  const size_t n = w.runs.size();
  copies_.fetch_add(n, std::memory_order_relaxed);
  CopyMode mode = mode_.load(std::memory_order_relaxed);
  if (mode == CopyMode::kernel) {
    // The gather kernel gives one thread block per run and reads over PCIe at a few GB/s per block: fine for
    // 4 KiB runs, a bottleneck (and SM time) for large ones, which the copy engine moves at full link speed.
    uint64_t bytes = 0;
    for (const CopyRun& r : w.runs) bytes += r.len;
    if (bytes >= uint64_t{large_run_bytes} * n) mode = CopyMode::percopy;
  }
  switch (mode) {
    case CopyMode::batch: {
      w.dsts.resize(n);
      w.srcs.resize(n);
      w.sizes.resize(n);
      for (size_t i = 0; i < n; ++i) {
        w.dsts[i] = w.runs[i].dst;
        w.srcs[i] = w.runs[i].src;
        w.sizes[i] = w.runs[i].len;
      }
      cudaMemcpyAttributes attr{};
      attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
      size_t attr_index = 0;
      return cudaMemcpyBatchAsync(w.dsts.data(), w.srcs.data(), w.sizes.data(), n, &attr, &attr_index, 1, w.stream);
    }
    case CopyMode::percopy:
      for (const CopyRun& r : w.runs) {
        cudaError_t e = cudaMemcpyAsync(r.dst, r.src, r.len, cudaMemcpyHostToDevice, w.stream);
        if (e != cudaSuccess) return e;
      }
      return cudaSuccess;
    case CopyMode::kernel: {
      size_t slice = (w.next_ticket % w.events.size()) * kernel_runs_max;
      for (size_t off = 0; off < n; off += kernel_runs_max) {
        size_t k = std::min<size_t>(kernel_runs_max, n - off);
        // Descriptor slices are reused only after their ticket's event completed (see flush()).
        std::copy(w.runs.begin() + off, w.runs.begin() + off + k, w.descriptors + slice);
        if (off + k < n) {  // more than one launch: later ones must not overwrite this slice early
          gather_kernel<<<static_cast<unsigned>(k), 256, 0, w.stream>>>(w.descriptors + slice);
          cudaError_t e = cudaStreamSynchronize(w.stream);
          if (e != cudaSuccess) return e;
          continue;
        }
        gather_kernel<<<static_cast<unsigned>(k), 256, 0, w.stream>>>(w.descriptors + slice);
      }
      return cudaGetLastError();
    }
  }
  return cudaErrorInvalidValue;
}

uint64_t CudaMover::flush(uint32_t worker) {
  PerWorker& w = state(worker);
  const size_t ring = w.events.size();
  // Keep the event ring from lapping itself: wait for the oldest ticket if all are in flight.
  while (w.next_ticket - w.completed > ring - 1) {
    cudaEventSynchronize(w.events[(w.completed + 1) % ring]);
    ++w.completed;
  }
  uint64_t ticket = w.next_ticket++;
  groups_.fetch_add(1, std::memory_order_relaxed);
  cudaError_t e = w.sticky_error ? cudaSuccess : launch(w);
  w.runs.clear();
  if (e == cudaSuccess && !w.sticky_error) e = cudaEventRecord(w.events[ticket % ring], w.stream);
  if (e != cudaSuccess && !w.sticky_error) w.sticky_error = EIO;
  return ticket;
}

int CudaMover::poll(uint32_t worker, uint64_t ticket) {
  PerWorker& w = state(worker);
  if (w.sticky_error) return -w.sticky_error;
  if (ticket <= w.completed) return 1;
  cudaError_t e = cudaEventQuery(w.events[ticket % w.events.size()]);
  if (e == cudaErrorNotReady) return 0;
  if (e != cudaSuccess) {
    w.sticky_error = EIO;
    return -EIO;
  }
  w.completed = ticket;
  return 1;
}

int CudaMover::stage_in(uint32_t worker, void* staging, const void* src, uint32_t len) {
  PerWorker& w = state(worker);
  stage_ins_.fetch_add(1, std::memory_order_relaxed);
  // Same stream as the worker's staging->GPU copies: ordered after them, no extra synchronisation.
  cudaError_t e = cudaMemcpyAsync(staging, src, len, cudaMemcpyDeviceToHost, w.stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(w.stream);
  return e == cudaSuccess ? 0 : -EIO;
}

std::vector<double> CudaMover::measure(uint32_t worker, void* scratch, uint32_t runs, int reps) {
  PerWorker& w = state(worker);
  std::vector<double> result;
  const CopyMode saved = mode_.load();
  const uint32_t len = 4096;
  for (CopyMode m : {CopyMode::batch, CopyMode::kernel, CopyMode::percopy}) {
    mode_.store(m);
    std::vector<double> times;
    bool ok = true;
    for (int r = 0; r < reps + 1 && ok; ++r) {  // the first rep warms up (module load, descriptors)
      auto t0 = std::chrono::steady_clock::now();
      for (uint32_t i = 0; i < runs; ++i) {  // scattered: reversed order in the destination
        uint8_t* dst = static_cast<uint8_t*>(scratch) + static_cast<size_t>(runs - 1 - i) * 2 * len;
        stage_out(worker, dst, static_cast<uint8_t*>(staging_.base) + static_cast<size_t>(i) * len, len);
      }
      uint64_t t = flush(worker);
      int p;
      while ((p = poll(worker, t)) == 0) {
      }
      if (p < 0) ok = false;
      if (r > 0) times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    if (!ok) {  // clear the failure so later methods (and real use) start clean
      w.sticky_error = 0;
      cudaGetLastError();
      result.push_back(-1);
      continue;
    }
    std::sort(times.begin(), times.end());
    result.push_back(times[times.size() / 2]);
  }
  mode_.store(saved);
  copies_.store(0);
  groups_.store(0);
  return result;
}

}  // namespace gpuio::detail
