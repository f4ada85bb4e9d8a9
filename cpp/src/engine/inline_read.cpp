// Engine::read of a small run, done by the calling thread (EngineImpl::read_inline). A one-block read through a
// worker pays two hand-offs: the post wakes the worker (a futex wake-up when it slept) and the batch's end wakes
// the caller; on a 2-core VM each cost tens of microseconds, several times the device's read (a one-row
// TensorFile read took 0.35-1.8 ms against 66 us for one O_DIRECT pread). A synchronous read of one contiguous run
// of at most limits::inline_bytes_max bytes therefore runs on the caller's thread: one pread, from the page cache
// when it holds the whole range (IoBackend::read_now), else from the device. Asynchronous submissions never take
// this path, so a prefetch stays a prefetch.
#include <algorithm>
#include <cerrno>
#include <thread>

#include "engine/engine_impl.hpp"
#include "gpuio/status.hpp"

namespace gpuio::detail {

bool EngineImpl::read_inline(const int64_t* blocks, size_t n, void* buf) {
  const uint32_t bs = opts.block_size;
  if (n == 0 || uint64_t{n} * bs > limits::inline_bytes_max || !inline_ok || buf == nullptr) return false;
  const uint32_t align = direct_align.load(std::memory_order_relaxed);
  if (align != 0 && reinterpret_cast<uintptr_t>(buf) % align != 0) return false;  // the worker path stages it
  const int64_t first = blocks[0];
  for (size_t i = 1; i < n; ++i)
    if (blocks[i] != first + static_cast<int64_t>(i)) return false;  // several runs: the workers run them at once
  if (first < 0 || foreign()) return false;  // submit() names the bad id / refuses the fork
  std::shared_ptr<Target> target;
  Location loc;
  {
    // Under the submit lock, as a batch is planned: close_target() and close() either ran before (the blocks are
    // then in no target: submit() says so) or wait for this read (the target's batch count, inline_readers_).
    std::lock_guard<std::mutex> g(submit_mu_);
    if (closed_.load()) return false;
    std::shared_ptr<const TargetMap> map = target_map();
    const ptrdiff_t k = map->find(static_cast<uint64_t>(first));
    if (k < 0) return false;
    target = map->targets[static_cast<size_t>(k)];
    const uint64_t rel = static_cast<uint64_t>(first) - target->base;
    if (rel + n > target->layout.total_blocks() || target->layout.contiguous_from(rel) < n) return false;
    loc = target->layout.map(rel);
    loc.device = target->devices[loc.device];
    target->batches.fetch_add(1, std::memory_order_acq_rel);
    inline_readers_.fetch_add(1, std::memory_order_acq_rel);
  }
  const uint32_t len = static_cast<uint32_t>(n * bs);
  bool cached = false;
  const int64_t got = backend->read_now(loc.device, buf, len, loc.offset, &cached);
  target->batch_ended();
  inline_readers_.fetch_sub(1, std::memory_order_acq_rel);
  if (got == -EOPNOTSUPP) {
    inline_ok = false;  // this backend has no such path: queue from now on
    return false;
  }
  if (got >= 0) {
    inline_ops.fetch_add(1, std::memory_order_relaxed);
    blocks_.fetch_add(static_cast<uint64_t>(got) / bs, std::memory_order_relaxed);
    inline_bytes.fetch_add(static_cast<uint64_t>(got), std::memory_order_relaxed);
    if (cached) inline_cached_ops.fetch_add(1, std::memory_order_relaxed);
  }
  if (got == len) return true;
  // Failed or short (past the device's end): the same error a worker's read gives, naming the first block not read.
  const int err = got < 0 ? static_cast<int>(-got) : ENODATA;
  const uint64_t good = got < 0 ? 0 : static_cast<uint64_t>(got) / bs;
  throw IoError(err, "read failed at block " + std::to_string(first + static_cast<int64_t>(good)) + " (index " +
                         std::to_string(good) + " of an inline read): device " + std::to_string(loc.device) + " '" +
                         device_path(loc.device) + "' offset " + std::to_string(loc.offset + good * bs) + ": " +
                         errno_name(err));
}

void EngineImpl::wait_inline() const {
  while (inline_readers_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

}  // namespace gpuio::detail
