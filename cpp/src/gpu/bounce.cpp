#include "gpu/bounce.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "gpu/cuda_check.hpp"
#include "gpu/host_alloc.hpp"
#include "gpuio/gpu.hpp"
#include "gpuio/status.hpp"

namespace gpuio::detail {

namespace {
// cudaHostAlloc and cudaHostRegister are not allowed under global stream capture in this thread; relaxed mode lets
// them through (the allocation is not part of any graph).
struct RelaxedCapture {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode); }
};

void alloc_mapped(size_t bytes, void** host, void** dev) {
  RelaxedCapture relaxed;
  GPUIO_CUDA(host_alloc(host, bytes, cudaHostAllocMapped | cudaHostAllocPortable, "stream_bounce_graph"));
  GPUIO_CUDA(cudaHostGetDevicePointer(dev, *host, 0));
}
}  // namespace

void BouncePool::init(uint64_t bytes, uint32_t block_bytes) {
  GPUIO_EXPECT(bytes >= gpu_limits::bounce_bytes_min,
               "bounce_bytes=" + std::to_string(bytes) + " must be >= " + std::to_string(gpu_limits::bounce_bytes_min));
  block_bytes_ = block_bytes;
  slots_ = gpu_limits::bounce_slots;
  slot_blocks_ = static_cast<uint32_t>(std::max<uint64_t>(1, bytes / slots_ / block_bytes));
  slot_blocks_ = std::min(slot_blocks_, gpu_limits::request_blocks_max);
  const uint64_t ids_at = (this->bytes() + 4095) / 4096 * 4096;
  block_ = PinnedBlock::take(ids_at + sizeof(int64_t) * slot_blocks_ * slots_, false, PinnedReuse::owned,
                             "stream_bounce");
  std::string why;
  bool registered;
  {
    RelaxedCapture relaxed;
    registered = block_->register_now(&why);
  }
  if (!registered) {
    block_.reset();
    throw std::runtime_error("cannot page-lock the stream bounce pool (bounce_bytes=" + std::to_string(bytes) +
                             ") for CUDA: " + why);
  }
  void* dev = nullptr;
  GPUIO_CUDA(cudaHostGetDevicePointer(&dev, block_->data(), 0));
  data_ = block_->data();
  data_dev_ = static_cast<uint8_t*>(dev);
  ids_ = reinterpret_cast<int64_t*>(data_ + ids_at);
  ids_dev_ = reinterpret_cast<int64_t*>(static_cast<uint8_t*>(dev) + ids_at);
  events_.resize(slots_);
  for (uint32_t i = 0; i < slots_; ++i) {
    GPUIO_CUDA(cudaEventCreateWithFlags(&events_[i], cudaEventDisableTiming));
    free_.push_back(static_cast<int>(slots_ - 1 - i));
  }
}

void BouncePool::destroy() {
  std::lock_guard<std::mutex> g(mu_);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  events_.clear();
  in_use_.clear();
  free_.clear();
  block_.reset();
  data_ = data_dev_ = nullptr;
  ids_ = nullptr;
  ids_dev_ = nullptr;
  for (Dedicated& d : dedicated_) {
    host_free(d.data);
    host_free(d.ids);
  }
  dedicated_.clear();
}

void BouncePool::reclaim_locked() {
  while (!in_use_.empty()) {
    cudaError_t e = cudaEventQuery(in_use_.front().event);
    if (e == cudaErrorNotReady) return;
    // Any other outcome ends the slot's use: success, or an error the request itself reports.
    free_.push_back(in_use_.front().slot);
    in_use_.pop_front();
  }
}

BounceRegion BouncePool::reserve(uint32_t wait_ms, bool* waited) {
  std::unique_lock<std::mutex> g(mu_);
  GPUIO_EXPECT(data_ != nullptr, "GPU runtime is closed");
  reclaim_locked();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  auto nap = std::chrono::microseconds(20);
  while (free_.empty()) {
    *waited = true;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw IoError(ETIMEDOUT, "no stream bounce slot came free in " + std::to_string(wait_ms) + " ms (" +
                                   std::to_string(slots_) + " slots of " + std::to_string(slot_blocks_) +
                                   " blocks, all held by stream requests that have not completed)");
    }
    g.unlock();
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::microseconds(1000));
    g.lock();
    reclaim_locked();
  }
  return take_locked();
}

bool BouncePool::try_reserve(BounceRegion* out) {
  std::lock_guard<std::mutex> g(mu_);
  GPUIO_EXPECT(data_ != nullptr, "GPU runtime is closed");
  reclaim_locked();
  if (free_.empty()) return false;
  *out = take_locked();
  return true;
}

BounceRegion BouncePool::take_locked() {
  int slot = free_.back();
  free_.pop_back();
  BounceRegion r;
  r.slot = slot;
  const uint64_t at = uint64_t{static_cast<uint32_t>(slot)} * slot_blocks_ * block_bytes_;
  r.data = data_ + at;
  r.data_dev = data_dev_ + at;
  r.ids = ids_ + uint64_t{static_cast<uint32_t>(slot)} * slot_blocks_;
  r.ids_dev = ids_dev_ + uint64_t{static_cast<uint32_t>(slot)} * slot_blocks_;
  return r;
}

void BouncePool::release_after(const BounceRegion& r, cudaStream_t stream) {
  if (r.slot < 0) return;
  std::lock_guard<std::mutex> g(mu_);
  cudaEvent_t e = events_[r.slot];
  if (cudaEventRecord(e, stream) != cudaSuccess) {
    // The stream is unusable: nothing will run there, so the slot is free at once.
    cudaGetLastError();
    free_.push_back(r.slot);
    return;
  }
  in_use_.push_back({r.slot, e});
}

void BouncePool::unreserve(const BounceRegion& r) {
  if (r.slot < 0) return;
  std::lock_guard<std::mutex> g(mu_);
  free_.push_back(r.slot);
}

BounceRegion BouncePool::dedicated(uint32_t blocks) {
  std::lock_guard<std::mutex> g(mu_);
  Dedicated d{};
  void* dev = nullptr;
  alloc_mapped(uint64_t{blocks} * block_bytes_, reinterpret_cast<void**>(&d.data), &dev);
  d.data_dev = static_cast<uint8_t*>(dev);
  alloc_mapped(sizeof(int64_t) * blocks, reinterpret_cast<void**>(&d.ids), &dev);
  d.ids_dev = static_cast<int64_t*>(dev);
  d.blocks = blocks;
  dedicated_.push_back(d);
  BounceRegion r;
  r.data = d.data;
  r.data_dev = d.data_dev;
  r.ids = d.ids;
  r.ids_dev = d.ids_dev;
  return r;
}

const int64_t* BouncePool::host_ids(uint64_t device_address) const {
  const uint64_t a = device_address;
  const uint64_t base = reinterpret_cast<uint64_t>(ids_dev_);
  if (ids_dev_ && a >= base && a < base + sizeof(int64_t) * slot_blocks_ * slots_) {
    return ids_ + (a - base) / sizeof(int64_t);
  }
  std::lock_guard<std::mutex> g(mu_);  // dedicated_ may grow meanwhile (another thread capturing)
  for (const Dedicated& d : dedicated_) {
    const uint64_t b = reinterpret_cast<uint64_t>(d.ids_dev);
    if (a >= b && a < b + sizeof(int64_t) * d.blocks) return d.ids + (a - b) / sizeof(int64_t);
  }
  return nullptr;
}

}  // namespace gpuio::detail
