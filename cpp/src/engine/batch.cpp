#include "engine/batch.hpp"

#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include "engine/engine_impl.hpp"
#include "engine/futex.hpp"
#include "gpuio/status.hpp"

namespace gpuio::detail {

void Batch::record_failure(const BatchFailure& f) {
  std::lock_guard<std::mutex> g(failure_mu);
  if (f.index < failure.index) failure = f;
}

void Batch::extent_finished() {
  if (remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  const auto t0 = Clock::now();
  std::shared_ptr<Batch> keep = std::move(self);  // the batch lives until this function returns
  bool failed;
  {
    std::lock_guard<std::mutex> g(failure_mu);
    failed = failure.err != 0;
  }
  if (failed) error_text = failure_message();
  engine->on_batch_done(*this);
  EngineImpl* e = engine;  // the waiter may drop its handle as soon as the state word is published
  // seq_cst store, then the sleeper count (a waiter counts itself, then re-reads state in futex_wait): either the
  // waiter sees the new state or this sees the waiter. A waiter still spinning needs no system call.
  state.store(failed ? kFailed : kDone, std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_all(&state);
  e->batches_ended.fetch_add(1, std::memory_order_seq_cst);  // the same handshake for wait_any()
  if (e->any_waiters.load(std::memory_order_seq_cst) != 0) futex_wake_all(&e->batches_ended);
  e->signal_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(),
                         std::memory_order_relaxed);
}

std::string Batch::failure_message() const {
  const char* what = op == IoOp::read ? "read" : "write";
  const std::string path = engine->device_path(failure.device);
  return std::string(what) + " failed at block " + std::to_string(failure.block) + " (index " +
         std::to_string(failure.index) + " of batch " + std::to_string(seq) + "): device " +
         std::to_string(failure.device) + " '" + path + "' offset " + std::to_string(failure.offset) + ": " +
         errno_name(failure.err);
}

}  // namespace gpuio::detail

namespace gpuio {

using detail::Batch;

bool BatchHandle::done() const {
  return batch_ && batch_->state.load(std::memory_order_acquire) != detail::kRunning;
}

uint64_t BatchHandle::seq() const { return batch_ ? batch_->seq : 0; }

void BatchHandle::wait(int64_t timeout_ms) const {
  if (!batch_) throw std::invalid_argument("wait() on an empty batch handle");
  if (batch_->state.load(std::memory_order_acquire) == detail::kRunning && batch_->engine->foreign()) {
    throw std::runtime_error("batch " + std::to_string(batch_->seq) + " was submitted by process " +
                             std::to_string(batch_->engine->owner_pid) + "; this process (" + std::to_string(getpid()) +
                             ", a fork of it) has none of its engine's workers, so it can never complete here: "
                             "submit the request again in this process");
  }
  if (timeout_ms < 0) timeout_ms = batch_->io_timeout_ms;
  auto deadline = detail::Clock::now() + std::chrono::milliseconds(timeout_ms);
  const uint64_t completed_at_start = batch_->engine->completed_requests();
  // A short spin catches fast completions without a system call.
  for (int i = 0; i < (batch_->spin ? 2000 : 0) && batch_->state.load(std::memory_order_acquire) == detail::kRunning; ++i) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  for (;;) {
    uint32_t s = batch_->state.load(std::memory_order_acquire);
    if (s == detail::kDone) return;
    if (s == detail::kFailed) {
      std::lock_guard<std::mutex> g(batch_->failure_mu);
      throw IoError(batch_->failure.err, batch_->error_text);
    }
    auto now = detail::Clock::now();
    if (now >= deadline) {
      throw IoError(ETIMEDOUT, "batch " + std::to_string(batch_->seq) + " not complete after " +
                                   std::to_string(timeout_ms) + " ms: " +
                                   batch_->engine->stall_reason(completed_at_start, *batch_) +
                                   "; its buffers stay in use");
    }
    auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now).count();
    batch_->sleepers.fetch_add(1, std::memory_order_seq_cst);
    detail::futex_wait(&batch_->state, detail::kRunning, std::min<int64_t>(left, 100000000));
    batch_->sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

size_t wait_any(const std::vector<BatchHandle>& hs, int64_t timeout_ms) {
  if (hs.empty()) throw std::invalid_argument("wait_any() on an empty list of batches");
  detail::EngineImpl* e = nullptr;
  for (size_t i = 0; i < hs.size(); ++i) {
    if (!hs[i].batch_) throw std::invalid_argument("wait_any(): handle " + std::to_string(i) + " is empty");
    if (e && hs[i].batch_->engine != e) {
      throw std::invalid_argument("wait_any(): handle " + std::to_string(i) + " belongs to another engine than handle 0");
    }
    e = hs[i].batch_->engine;
  }
  e->check_owner();
  if (timeout_ms < 0) timeout_ms = hs[0].batch_->io_timeout_ms;
  auto deadline = detail::Clock::now() + std::chrono::milliseconds(timeout_ms);
  const uint64_t completed_at_start = e->completed_requests();
  for (;;) {
    uint32_t seen = e->batches_ended.load(std::memory_order_seq_cst);
    for (size_t i = 0; i < hs.size(); ++i) {
      if (hs[i].batch_->state.load(std::memory_order_acquire) != detail::kRunning) return i;
    }
    auto now = detail::Clock::now();
    if (now >= deadline) {
      throw IoError(ETIMEDOUT, "none of " + std::to_string(hs.size()) + " batches complete after " +
                                   std::to_string(timeout_ms) + " ms: batch " + std::to_string(hs[0].batch_->seq) +
                                   " has " + e->stall_reason(completed_at_start, *hs[0].batch_) +
                                   "; their buffers stay in use");
    }
    auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now).count();
    // Counted before sleeping, then futex_wait re-reads the word: a batch ending after the scan above either
    // changed the word (no sleep) or sees this waiter and wakes it.
    e->any_waiters.fetch_add(1, std::memory_order_seq_cst);
    detail::futex_wait(&e->batches_ended, seen, std::min<int64_t>(left, 100000000));
    e->any_waiters.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace gpuio
