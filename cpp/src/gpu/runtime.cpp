#include <cuda.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "gpu/cuda_check.hpp"
#include "gpu/host_alloc.hpp"
#include "gpu/runtime_impl.hpp"
#include "gpuio/limits.hpp"
#include "gpuio/status.hpp"

namespace gpuio {


void GpuRuntime::Impl::start() {
  // The knob table's ranges and choices. stream_wait has no host-function mode: CUDA forbids a host function
  // waiting on work not ordered before it (the engine's staging->GPU copies run on other streams), and such a wait
  // deadlocked on the H200 (docs/decisions/0001).
  validate(opts);
  if (opts.stream_wait == "wait_value") {
    wait_value_fn = detail::driver_entry_point("cuStreamWaitValue32");
    if (!wait_value_fn) throw std::runtime_error("stream_wait='wait_value' but the driver has no cuStreamWaitValue32");
  }
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    throw std::runtime_error("no CUDA device: " + (e != cudaSuccess ? detail::cuda_error_text(e) : "count is 0"));
  }
  device = opts.device;
  if (device < 0) GPUIO_CUDA(cudaGetDevice(&device));
  GPUIO_EXPECT(device < count, "device=" + std::to_string(device) + " but " + std::to_string(count) + " CUDA devices exist");
  GPUIO_CUDA(cudaSetDevice(device));
  cudaDeviceProp prop{};
  GPUIO_CUDA(cudaGetDeviceProperties(&prop, device));
  device_name = prop.name;

  GPUIO_CUDA(detail::preload_stream_kernels());
  staging = engine.staging_region();
  std::string why;
  if (!engine.set_staging_registered(true, &why)) {
    throw std::runtime_error("cannot page-lock the engine's staging (" + std::to_string(staging.bytes) +
                             " bytes) for CUDA: " + why);
  }
  staging_registered = true;
  mover = std::make_unique<detail::CudaMover>(device, staging,
                                              opts.copy == "auto" ? detail::CopyMode::batch
                                                                  : detail::parse_copy_mode(opts.copy));
  if (opts.copy == "auto") {
    // Measure the three methods on one worker pass worth of scattered 4 KiB runs and keep the fastest.
    const uint32_t runs = 64;
    void* scratch = nullptr;
    GPUIO_CUDA(cudaMalloc(&scratch, size_t{runs} * 2 * 4096));
    std::vector<double> t = mover->measure(limits::workers_max, scratch, runs, 15);
    cudaFree(scratch);
    const detail::CopyMode modes[] = {detail::CopyMode::batch, detail::CopyMode::kernel, detail::CopyMode::percopy};
    int best = -1;
    copy_choice = "measured, " + std::to_string(runs) + " scattered 4 KiB runs per group:";
    for (int i = 0; i < 3; ++i) {
      copy_choice += std::string(" ") + detail::copy_mode_name(modes[i]) + "=" +
                     (t[i] < 0 ? std::string("failed") : std::to_string(static_cast<int>(t[i])) + "us");
      if (t[i] >= 0 && (best < 0 || t[i] < t[best])) best = i;
    }
    if (best < 0) throw std::runtime_error("every staging->GPU copy method failed: " + copy_choice);
    mover->set_mode(modes[best]);
    if (modes[best] == detail::CopyMode::kernel) {
      copy_choice += "; groups averaging >= 64 KiB per run go by copy engine (percopy)";
    }
  } else {
    copy_choice = "set by option copy='" + opts.copy + "'";
    if (opts.copy == "kernel") copy_choice += "; groups averaging >= 64 KiB per run go by copy engine (percopy)";
  }

  const uint32_t nq = total_queues();
  GPUIO_CUDA(detail::host_alloc(reinterpret_cast<void**>(&shared_host), sizeof(GpuQueueShared) * nq,
                                cudaHostAllocMapped, "gpu_queues"));
  std::memset(static_cast<void*>(shared_host), 0, sizeof(GpuQueueShared) * nq);
  GPUIO_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&shared_dev), shared_host, 0));
  GPUIO_CUDA(cudaMalloc(reinterpret_cast<void**>(&tails), sizeof(uint32_t) * nq));
  GPUIO_CUDA(cudaMemset(tails, 0, sizeof(uint32_t) * nq));
  GPUIO_CUDA(cudaMalloc(reinterpret_cast<void**>(&done_cache), sizeof(uint32_t) * nq));
  GPUIO_CUDA(cudaMemset(done_cache, 0, sizeof(uint32_t) * nq));
  if (opts.device_read == "auto") {
    const size_t slots = size_t{opts.queues} * gpu_limits::landing_slots;
    GPUIO_CUDA(detail::host_alloc(reinterpret_cast<void**>(&landing_host), slots * gpu_limits::landing_slot_bytes,
                                  cudaHostAllocMapped, "gpu_landing"));
    GPUIO_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&landing_dev), landing_host, 0));
    GPUIO_CUDA(cudaMalloc(reinterpret_cast<void**>(&landing_busy), sizeof(uint32_t) * slots));
    GPUIO_CUDA(cudaMemset(landing_busy, 0, sizeof(uint32_t) * slots));
  }
  GPUIO_CUDA(detail::host_alloc(reinterpret_cast<void**>(&cells_host), sizeof(uint32_t) * gpu_limits::stream_cells_max,
                                cudaHostAllocMapped, "stream_cells"));
  std::memset(cells_host, 0, sizeof(uint32_t) * gpu_limits::stream_cells_max);
  GPUIO_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&cells_dev), cells_host, 0));
  GPUIO_CUDA(detail::host_alloc(reinterpret_cast<void**>(&ids_pinned), sizeof(int64_t) * gpu_limits::request_blocks_max,
                                cudaHostAllocDefault, "gpu_request_ids"));
  GPUIO_CUDA(cudaStreamCreateWithFlags(&control_stream, cudaStreamNonBlocking));
  bounce.init(opts.bounce_bytes, engine.options().block_size);
  done_pool = std::make_shared<StreamDone::Pool>(device);
  done_pool->fill(64);  // more are made on demand (handles kept alive by the caller)
  GPUIO_CUDA(cudaDeviceSynchronize());
  qstate.resize(nq);
  engine.set_device_mover(mover.get());
  poller = std::thread([this] { run_poller(); });
}

void GpuRuntime::Impl::shutdown() {
  if (closed) return;
  closed = true;
  stop.store(true, std::memory_order_release);
  if (poller.joinable()) poller.join();
  engine.close();  // workers drain: device batches in flight still use the mover
  engine.set_device_mover(nullptr);
  mover.reset();
  bounce.destroy();
  if (control_stream) cudaStreamDestroy(control_stream);
  detail::host_free(ids_pinned);
  detail::host_free(cells_host);
  if (tails) cudaFree(tails);
  if (done_cache) cudaFree(done_cache);
  done_cache = nullptr;
  if (landing_busy) cudaFree(landing_busy);
  detail::host_free(landing_host);
  landing_busy = nullptr;
  landing_host = landing_dev = nullptr;
  detail::host_free(shared_host);
  if (staging_registered) engine.set_staging_registered(false);
  control_stream = nullptr;
  ids_pinned = nullptr;
  cells_host = nullptr;
  tails = nullptr;
  shared_host = nullptr;
  staging_registered = false;
}

GpuRuntime::GpuRuntime(Engine& engine, const GpuOptions& opts) : impl_(std::make_unique<Impl>(engine, opts)) {
  try {
    impl_->start();
  } catch (...) {
    impl_->shutdown();
    throw;
  }
}

GpuRuntime::~GpuRuntime() { close(); }

void GpuRuntime::close() {
  if (impl_ && impl_->owner_fork != detail::fork_generation()) {
    (void)impl_.release();  // a forked child: the parent's thread and CUDA state are not ours to end
    return;
  }
  if (impl_) impl_->shutdown();
}

uint32_t GpuRuntime::queue_count() const { return impl_->opts.queues; }

QueueRef GpuRuntime::queue(uint32_t i) const {
  if (i >= impl_->opts.queues) {
    throw std::out_of_range("queue " + std::to_string(i) + " out of range [0, " + std::to_string(impl_->opts.queues) + ")");
  }
  GPUIO_EXPECT(!impl_->closed, "GPU runtime is closed");
  return impl_->ref(i);
}

uint32_t GpuRuntime::failures() const { return impl_->failures.load(std::memory_order_acquire); }

std::string GpuRuntime::last_error() const {
  std::lock_guard<std::mutex> g(impl_->error_mu);
  return impl_->last_error;
}

void* GpuRuntime::alloc(size_t bytes) {
  GPUIO_EXPECT(bytes > 0, "alloc of 0 bytes");
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    throw std::runtime_error("cudaMalloc(" + std::to_string(bytes) + " bytes) failed: " + detail::cuda_error_text(e));
  }
  return p;
}

void GpuRuntime::free(void* p) {
  if (!p) return;
  cudaError_t e = cudaFree(p);
  if (e != cudaSuccess) throw std::invalid_argument("free of a pointer gpuio did not allocate: " + detail::cuda_error_text(e));
}

GpuStats GpuRuntime::stats() const {
  const Impl& m = *impl_;
  GpuStats s;
  s.copy_mode = m.mover ? detail::copy_mode_name(m.mover->mode()) : "closed";
  s.copy_choice = m.copy_choice;
  s.stream_wait = m.opts.stream_wait;
  s.stream_copy = m.opts.stream_copy;
  s.device_name = m.device_name;
  s.gpu_requests = m.requests.load();
  s.gpu_failures = m.failures.load();
  s.device_read = m.opts.device_read;
  s.landed_requests = m.landed_requests.load();
  s.device_requests = m.device_requests.load();
  s.device_read_mode = s.landed_requests && s.device_requests ? "landed+batch"
                       : s.landed_requests                    ? "landed"
                       : s.device_requests                    ? "batch"
                                                              : "none";
  s.device_api_requests = m.api_requests.load();
  s.device_api_submit_seconds = m.api_submit_ns.load() * 1e-9;
  s.device_api_engine_seconds = m.api_engine_ns.load() * 1e-9;
  s.device_api_signal_seconds = m.api_signal_ns.load() * 1e-9;
  if (m.mover) {
    s.copies = m.mover->copies();
    s.copy_groups = m.mover->groups();
    s.stage_in_copies = m.mover->stage_ins();
  }
  s.stream_requests = m.stream_requests.load();
  s.stream_chunks = m.stream_chunks.load();
  s.stream_host_submits = m.stream_host_submits.load();
  s.bounce_bytes = m.bounce.bytes();
  s.bounce_waits = m.bounce_waits.load();
  s.stream_call_seconds = m.stream_call_ns.load() * 1e-9;
  s.stream_check_seconds = m.stream_check_ns.load() * 1e-9;
  s.stream_engine_seconds = m.stream_engine_ns.load() * 1e-9;
  s.stream_wait_seconds = m.stream_wait_ns.load() * 1e-9;
  s.stream_copy_seconds = m.stream_copy_ns.load() * 1e-9;
  s.stream_release_seconds = m.stream_release_ns.load() * 1e-9;
  s.poller_cpu_seconds = m.poller_cpu.load();
  s.last_error = last_error();
  return s;
}

std::vector<std::array<uint32_t, 3>> GpuRuntime::take_device_api_trace() {
  std::lock_guard<std::mutex> g(impl_->trace_mu);
  std::vector<std::array<uint32_t, 3>> out;
  out.reserve(impl_->trace.size());
  // Oldest first: once full, the oldest record is the one the next write would replace.
  for (size_t i = 0; i < impl_->trace.size(); ++i) out.push_back(impl_->trace[(impl_->trace_next + i) % impl_->trace.size()]);
  impl_->trace.clear();
  impl_->trace_next = 0;
  return out;
}

GpuEngine::~GpuEngine() {
  if (runtime_) runtime_->close();
}

std::unique_ptr<GpuEngine> GpuEngine::create(const EngineOptions& opts, const GpuOptions& gpu) {
  std::unique_ptr<GpuEngine> g(new GpuEngine());
  g->engine_ = Engine::create(opts);
  g->runtime_ = std::make_unique<GpuRuntime>(*g->engine_, gpu);
  return g;
}

namespace gpu {

DeviceReport probe_devices() {
  DeviceReport r;
  cudaDriverGetVersion(&r.driver_version);
  cudaRuntimeGetVersion(&r.runtime_version);
  cudaError_t e = cudaGetDeviceCount(&r.count);
  if (e != cudaSuccess) {
    r.count = 0;
    r.error = "no CUDA device: " + detail::cuda_error_text(e);
    return r;
  }
  if (r.count == 0) {
    r.error = "no CUDA device: cudaGetDeviceCount returned 0";
    return r;
  }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) == cudaSuccess) {
    r.name = p.name;
    r.sm_count = p.multiProcessorCount;
  }
  return r;
}

void* host_device_pointer(void* host) {
  void* device = nullptr;
  cudaError_t e = cudaHostGetDevicePointer(&device, host, 0);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it so the next CUDA call does not report it
    throw std::invalid_argument("host memory at " + std::to_string(reinterpret_cast<uintptr_t>(host)) +
                                " is not pinned memory CUDA maps (cudaHostGetDevicePointer: " +
                                detail::cuda_error_text(e) + ")");
  }
  return device;
}

}  // namespace gpu

}  // namespace gpuio
