// StreamDone: a stream-ordered call's completion event (gpu.hpp), and the runtime's pool of such events.
// Events are created with timing off (the cheapest record) on the runtime's device and reused: a one-block
// read then records one pooled event instead of creating, recording and destroying a torch.cuda.Event.
// CUDA's rules this relies on (Programming Guide, stream and event behaviour): cudaEventQuery and
// cudaStreamWaitEvent work whatever the calling thread's current device is; cudaEventRecord needs the event
// and the stream on the same device (the runtime's: its streams' GPU).
#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "gpu/cuda_check.hpp"
#include "gpu/runtime_impl.hpp"

namespace gpuio {

StreamDone::Pool::~Pool() {
  // Events still here are idle; at interpreter exit the CUDA runtime may already be gone (errors ignored).
  for (cudaEvent_t e : free) cudaEventDestroy(e);
}

void StreamDone::Pool::fill(size_t n) {
  std::lock_guard<std::mutex> g(mu);
  for (size_t i = 0; i < n; ++i) {
    cudaEvent_t e = nullptr;
    GPUIO_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    free.push_back(e);
  }
}

cudaEvent_t StreamDone::Pool::take() {
  {
    std::lock_guard<std::mutex> g(mu);
    if (!free.empty()) {
      cudaEvent_t e = free.back();
      free.pop_back();
      return e;
    }
  }
  // More handles alive than the pool holds: one more event, created on the runtime's device without
  // changing the caller's (torch keeps its own notion of the current device in step with CUDA's).
  int prev = -1;
  GPUIO_CUDA(cudaGetDevice(&prev));
  if (prev != device) GPUIO_CUDA(cudaSetDevice(device));
  cudaEvent_t e = nullptr;
  cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  if (prev != device) cudaSetDevice(prev);
  if (err != cudaSuccess) {
    throw std::runtime_error("cudaEventCreateWithFlags (a stream call's completion event) failed: " +
                             detail::cuda_error_text(err));
  }
  return e;
}

void StreamDone::Pool::give(cudaEvent_t e) {
  std::lock_guard<std::mutex> g(mu);
  free.push_back(e);
}

StreamDone::StreamDone(std::shared_ptr<Pool> pool, void* event, uint32_t before)
    : pool_(std::move(pool)), event_(event), before_(before) {}

StreamDone::~StreamDone() {
  // Reusing the event is safe even while the stream has not reached this record: a later record replaces it
  // (cudaEventRecord captures the stream's work at the time of that call).
  if (event_) pool_->give(static_cast<cudaEvent_t>(event_));
}

bool StreamDone::query() const {
  cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) return false;
  throw std::runtime_error("cudaEventQuery (a stream call's completion) failed: " + detail::cuda_error_text(e));
}

bool StreamDone::wait(double timeout_s) const {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const auto spin_until = t0 + std::chrono::milliseconds(2);
  const auto deadline = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_s));
  auto nap = std::chrono::microseconds(20);
  for (;;) {
    if (query()) return true;
    const auto now = clock::now();
    if (now >= deadline) return false;
    if (now < spin_until) {
      std::this_thread::yield();  // a one-block read lands within tens of microseconds: poll, but share the core
    } else {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(1000));
    }
  }
}

void StreamDone::order(void* stream) const {
  GPUIO_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(event_), 0));
}

}  // namespace gpuio
