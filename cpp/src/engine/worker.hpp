// A worker thread owns one io queue (created on its own thread) and a slice of the staging pool.
// Other threads only post() extents to its inbox; everything else is touched by the owner alone.
#pragma once
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/extent.hpp"
#include "gpuio/io.hpp"

namespace gpuio::detail {

class EngineImpl;

struct WorkerCounters {
  std::atomic<uint64_t> ops{0}, bytes{0}, queue_full{0}, staging_exhausted{0}, short_transfers{0};
  std::atomic<uint64_t> busy_ns{0};          // finished busy stretches
  std::atomic<int64_t> busy_since_ns{-1};     // start of the current stretch (steady clock), -1 while asleep
  // Where a worker's busy time goes, per pass of its loop (a few clock reads per pass, not per request):
  // prepare (inbox + staging slots + request setup), io (the backend call that submits and reaps: a system
  // call for uring), device (the part of io spent inside an emulated device: sim only), handle (completions:
  // bookkeeping, staging->host copies, batch accounting), copy (staging->GPU: launch and poll), idle (spinning
  // for new work, before sleeping); device_wait (the part of io spent waiting for a paced emulated device's
  // completion to fall due: the device's time, not host work).
  std::atomic<uint64_t> passes{0}, prepare_ns{0}, io_ns{0}, device_ns{0}, handle_ns{0}, copy_ns{0}, idle_ns{0};
  std::atomic<uint64_t> device_wait_ns{0};
  // Passes that polled for a completion (low-latency mode: shallow queue) vs blocking waits in the backend.
  std::atomic<uint64_t> poll_waits{0}, block_waits{0};
  std::atomic<uint64_t> sleeps{0};  // idle -> futex sleep (the next post pays a wake-up)
  // Staging->device copies queued (DeviceMover::stage_out): one per extent on the slot path, one per chunk on
  // the batch-ordered path.
  std::atomic<uint64_t> device_copies{0}, device_copy_bytes{0};
};

class Worker {
 public:
  Worker(EngineImpl& engine, uint32_t id);
  ~Worker();
  // Starts the thread and waits until its queue exists; rethrows the queue's creation error.
  void start();
  // Stops after every posted extent finished.
  void stop();
  void post(std::vector<Extent>& extents);  // any thread; moves the extents out
  const WorkerCounters& counters() const { return counters_; }
  double cpu_seconds() const;  // CPU time of the worker thread so far
  double busy_seconds() const;  // time spent with work so far, the current stretch included

 private:
  struct Inflight {
    Extent e;
    uint32_t done = 0;     // bytes already transferred (short transfers are resubmitted)
    int32_t staging = -1;  // slot index in this worker's slice
  };

  void run(std::promise<void>& started);
  void take_inbox();
  bool prepare_pending();  // false when blocked on resources (queue full, staging exhausted)
  bool issue(uint32_t slot);
  void handle(const IoCompletion& c);
  void finish(uint32_t slot, int err);
  void complete(Inflight& f, int err);  // the extent is done (or failed): staging back, batch told
  void landed(OrderedChunk* c, uint32_t len);  // batch-ordered: an extent's bytes are in host
  void chunk_copied(OrderedChunk* c, int err);  // ... and the chunk's copy is done (or abandoned)
  void queue_copy(void* dst, const void* src, uint32_t len);
  void flush_copies(bool force);        // start the gathered staging->device copies (see copy_group_*)
  bool poll_copies();                   // finish extents whose copies landed; true if any are still pending
  bool spin_for_inbox();  // true when work arrived within limits::worker_spin_us
  void sleep_until_posted();

  EngineImpl& engine_;
  uint32_t id_;
  std::thread thread_;
  clockid_t cpu_clock_{};
  std::atomic<bool> cpu_clock_ok_{false};
  std::atomic<double> final_cpu_seconds_{0};  // set as the thread ends
  std::unique_ptr<IoQueue> queue_;
  WorkerCounters counters_;

  std::mutex inbox_mu_;
  std::vector<Extent> inbox_;
  std::atomic<uint32_t> signal_{0};
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> has_inbox_{false};
  std::atomic<bool> stop_{false};

  std::deque<Extent> pending_;
  std::vector<Inflight> slots_;
  std::vector<uint32_t> free_slots_;
  std::vector<uint32_t> retry_;  // slots whose remainder could not be re-queued yet
  std::vector<uint32_t> free_staging_;

  // Device reads (MemKind::device): after the device read lands in staging, the extent waits here for its
  // staging->GPU copy (DeviceMover) before its staging slot is freed and its batch told. The io slot is
  // freed at once, so copies never lower the queue depth.
  struct CopyGroup {
    uint64_t ticket;
    std::vector<Inflight> extents;
    std::vector<OrderedChunk*> chunks;  // batch-ordered staging: one copy each
  };
  std::vector<Inflight> copy_gather_;
  std::vector<OrderedChunk*> copy_gather_chunks_;
  uint64_t copy_gather_bytes_ = 0;
  std::chrono::steady_clock::time_point copy_gather_since_{};  // when the oldest gathered copy was queued
  std::deque<CopyGroup> copy_groups_;
};

}  // namespace gpuio::detail
