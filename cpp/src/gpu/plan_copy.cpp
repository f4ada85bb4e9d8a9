// The plan reader's CUDA copy stage (gpu/host/pipeline.hpp): piece k's copies go on stream k % streams of the
// device (non-blocking streams of its own: they never wait for the legacy default stream or user work), an event
// recorded after them frees the piece. Waits poll the events (yielding, then napping), never block in the driver.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu/host/pipeline.hpp"

namespace gpuio::detail {

namespace {

std::string cuda_text(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

class CudaStage final : public CopyStage {
 public:
  CudaStage(int device, uint32_t streams, uint32_t pieces) : device_(device) {
    cudaGetDevice(&previous_);
    check(cudaSetDevice(device), "cudaSetDevice");
    streams_.resize(streams, nullptr);
    for (auto& s : streams_) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    events_.resize(pieces, nullptr);
    for (auto& e : events_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    recorded_.assign(pieces, false);
  }

  ~CudaStage() override {
    drain();
    for (auto e : events_)
      if (e) cudaEventDestroy(e);
    for (auto s : streams_)
      if (s) cudaStreamDestroy(s);
    cudaSetDevice(previous_);
  }

  void copy(uint32_t piece, void* dst, const void* src, size_t n) override {
    check(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, stream(piece)), "cudaMemcpyAsync");
  }

  void piece_done(uint32_t piece) override {
    check(cudaEventRecord(events_[piece], stream(piece)), "cudaEventRecord");
    recorded_[piece] = true;
  }

  bool piece_free(uint32_t piece, bool wait) override {
    if (!recorded_[piece]) return true;
    auto t0 = std::chrono::steady_clock::now();
    auto nap = std::chrono::microseconds(20);
    while (true) {
      cudaError_t e = cudaEventQuery(events_[piece]);
      if (e == cudaSuccess) {
        recorded_[piece] = false;
        return true;
      }
      if (e != cudaErrorNotReady) check(e, "cudaEventQuery");
      if (!wait) return false;
      if (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, std::chrono::microseconds(1000));
      }
    }
  }

  const char* drain() override {
    for (uint32_t k = 0; k < events_.size(); ++k) {
      try {
        piece_free(k, true);
      } catch (const std::exception& e) {
        if (error_.empty()) error_ = e.what();
        recorded_[k] = false;
      }
    }
    // Copies given after a piece's last piece_done (a copy that threw midway through a piece): an event after
    // them on every stream, polled as the pieces' are.
    for (cudaStream_t s : streams_) {
      if (cudaEventRecord(events_[0], s) != cudaSuccess) {
        cudaGetLastError();
        continue;
      }
      recorded_[0] = true;
      try {
        piece_free(0, true);
      } catch (const std::exception& e) {
        if (error_.empty()) error_ = e.what();
        recorded_[0] = false;
      }
    }
    return error_.c_str();
  }

 private:
  cudaStream_t stream(uint32_t piece) const { return streams_[piece % streams_.size()]; }
  void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw std::runtime_error(cuda_text(e, what) + " (device " + std::to_string(device_) + ")");
    }
  }

  int device_;
  int previous_ = 0;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
  std::vector<bool> recorded_;
  std::string error_;
};

}  // namespace

std::unique_ptr<CopyStage> make_cuda_copy_stage(int device, uint32_t streams, uint32_t pieces) {
  return std::make_unique<CudaStage>(device, streams, pieces);
}

}  // namespace gpuio::detail
