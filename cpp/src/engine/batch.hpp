// A batch: the unit that completes as a whole. Its state word moves from running to done (every block in
// place) or failed (first failing block recorded), and waiters sleep on it with a futex.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/ordered.hpp"

#include "gpuio/engine.hpp"

namespace gpuio::detail {

using Clock = std::chrono::steady_clock;

enum BatchState : uint32_t { kRunning = 0, kDone = 1, kFailed = 2 };

struct BatchFailure {
  uint64_t index = UINT64_MAX;  // position of the failing block in the batch
  int64_t block = -1;
  uint32_t device = 0;
  uint64_t offset = 0;
  int err = 0;
};

class EngineImpl;
struct Target;  // engine/targets.hpp

struct Batch {
  uint64_t seq = 0;
  uint64_t blocks = 0;  // logical blocks in the batch (the controller's rate)
  uint32_t planned_workers = 0;  // active workers plan() spread it over (the controller rates only its own count's)
  IoOp op = IoOp::read;
  MemKind kind = MemKind::host;
  uint32_t io_timeout_ms = 0;
  bool spin = true;  // wait() polls briefly first (not for network backends: see IoBackend::fast_completions)
  std::atomic<uint32_t> state{kRunning};
  std::atomic<uint32_t> remaining{0};  // extents not finished
  std::atomic<uint32_t> sleepers{0};   // waiters inside futex_wait on state: only then is a wake-up system call due
  Clock::time_point submitted;
  double compute_seconds = 0;  // caller's time between the previous batch's end and this submission
  EngineImpl* engine = nullptr;
  std::shared_ptr<Batch> self;  // keeps the batch alive while extents are in flight
  // Batch-ordered staging windows (device reads of at least limits::ordered_min_bytes), if any; counted in
  // `remaining` by chunk, not by extent.
  std::vector<std::unique_ptr<OrderedWindow>> windows;
  // The targets (files) its blocks lie in, counted in each one's batches in flight until the batch ends.
  std::vector<std::shared_ptr<Target>> targets;

  std::mutex failure_mu;
  BatchFailure failure;  // the lowest failing index wins
  std::string error_text;  // set before the state turns kFailed, so handles outliving the engine can read it

  void record_failure(const BatchFailure& f);
  // Called once per extent by the worker that finished it; the last one publishes the state.
  void extent_finished();
  std::string failure_message() const;  // needs the engine (device paths)
};

}  // namespace gpuio::detail
