// The process's one pinned pool (engine/pinned_pool.hpp, gpuio/pinned_pool.hpp).
#include "engine/pinned_pool.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "gpuio/pinned_pool.hpp"

#ifdef GPUIO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace gpuio::detail {

namespace {
constexpr size_t kHuge = 2u << 20;

struct Free {
  uint8_t* data;
  bool registered;
  const char* use;  // the last holder's use: its bytes count there until another takes the block
};

bool cuda_register(void* p, size_t bytes, std::string* why) {
#ifdef GPUIO_HAVE_CUDA
  cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (e == cudaSuccess) return true;
  cudaGetLastError();  // not sticky: the next CUDA call must not report it
  if (why) *why = std::string("cudaHostRegister: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  return false;
#else
  (void)p;
  (void)bytes;
  if (why) *why = "gpuio was built without the CUDA layer";
  return false;
#endif
}

void cuda_unregister(void* p) {
#ifdef GPUIO_HAVE_CUDA
  if (cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();  // CUDA already gone (process exit): nothing to undo
#else
  (void)p;
#endif
}

uint8_t* map_block(size_t bytes, size_t touch_bytes) {
  void* m = mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  uint8_t* raw = static_cast<uint8_t*>(m);
  uint8_t* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) / kHuge * kHuge);
  if (aligned > raw) munmap(raw, aligned - raw);  // keep exactly [aligned, aligned + bytes)
  uint8_t* end = raw + bytes + kHuge;
  if (end > aligned + bytes) munmap(aligned + bytes, end - (aligned + bytes));
  // Private anonymous: a shared mapping would be shmem, which transparent huge pages leave alone.
  madvise(aligned, bytes, MADV_HUGEPAGE);
  for (size_t i = 0; i < touch_bytes && i < bytes; i += 4096) aligned[i] = 0;  // before CUDA pins them
  return aligned;
}
}  // namespace

struct PinnedPool {
  std::mutex mu;
  std::multimap<size_t, Free> free;  // bytes -> pooled blocks not in use
  PinnedPoolStats totals;            // uses and page_locked_bytes filled in by snapshot()
  std::map<std::string, PinnedUseStats> uses;
  pid_t pid = getpid();

  static PinnedPool& get() {
    static PinnedPool* pool = new PinnedPool;  // never destroyed: blocks may come back during exit
    return *pool;
  }

  // A forked child's copies of the parent's blocks were never registered here: it starts its own pool. The copies
  // are forgotten, not unmapped: CUDA may have kept registered ranges out of the child (MADV_DONTFORK), and what
  // the child mapped since may lie there.
  void fork_check() {
    if (pid != getpid()) {
      free.clear();
      totals = PinnedPoolStats{};
      uses.clear();
      pid = getpid();
    }
  }

  // Adds (sign +1) or removes (-1) a block's bytes from the counters.
  void count(const char* use, PinnedReuse reuse, uint64_t bytes, bool registered, int sign) {
    PinnedUseStats& u = uses[use];
    const uint64_t reg = registered ? bytes : 0;
    auto add = [sign](uint64_t& v, uint64_t d) { v = sign > 0 ? v + d : v - d; };
    add(u.made_bytes, bytes);
    add(u.registered_bytes, reg);
    if (reuse == PinnedReuse::pooled) {
      add(totals.made_bytes, bytes);
      add(totals.registered_bytes, reg);
    } else {
      add(totals.owned_bytes, bytes);
      add(totals.owned_registered_bytes, reg);
    }
    if (u.made_bytes == 0 && u.free_bytes == 0) uses.erase(use);
  }

  void count_free(const char* use, uint64_t bytes, int sign) {
    PinnedUseStats& u = uses[use];
    u.free_bytes = sign > 0 ? u.free_bytes + bytes : u.free_bytes - bytes;
    totals.free_bytes = sign > 0 ? totals.free_bytes + bytes : totals.free_bytes - bytes;
  }
};

std::unique_ptr<PinnedBlock> PinnedBlock::take(size_t bytes, bool want_registered, PinnedReuse reuse, const char* use,
                                               size_t touch_bytes) {
  bytes = (bytes + kHuge - 1) / kHuge * kHuge;
  if (bytes == 0) bytes = kHuge;
  PinnedPool& pool = PinnedPool::get();
  uint8_t* data = nullptr;
  bool reg = false;
  pid_t pid;
  {
    std::lock_guard<std::mutex> g(pool.mu);
    pool.fork_check();
    pid = pool.pid;
    auto it = reuse == PinnedReuse::pooled ? pool.free.find(bytes) : pool.free.end();
    if (it != pool.free.end()) {
      data = it->second.data;
      reg = it->second.registered;
      pool.count_free(it->second.use, bytes, -1);
      pool.count(it->second.use, reuse, bytes, reg, -1);  // the block moves to this use
      pool.count(use, reuse, bytes, reg, +1);
      pool.free.erase(it);
    }
  }
  if (data == nullptr) {
    data = map_block(bytes, reuse == PinnedReuse::pooled || want_registered ? bytes : touch_bytes);
    std::lock_guard<std::mutex> g(pool.mu);
    pool.fork_check();
    pid = pool.pid;
    pool.count(use, reuse, bytes, false, +1);
  }
  std::unique_ptr<PinnedBlock> b(new PinnedBlock(data, bytes, reg, reuse, use, pid));
  if (want_registered) b->register_now();
  return b;
}

bool PinnedBlock::register_now(std::string* why) {
  if (registered_) return true;
  PinnedPool& pool = PinnedPool::get();
  {
    std::lock_guard<std::mutex> g(pool.mu);
    pool.fork_check();
    if (pid_ != pool.pid) {
      if (why) *why = "a forked child cannot register its parent's pinned block";
      return false;
    }
  }
  if (!cuda_register(data_, bytes_, why)) return false;
  registered_ = true;
  std::lock_guard<std::mutex> g(pool.mu);
  if (pid_ == pool.pid) {
    pool.count(use_, reuse_, bytes_, false, -1);
    pool.count(use_, reuse_, bytes_, true, +1);
  }
  return true;
}

void PinnedBlock::unregister_now() {
  if (!registered_) return;
  PinnedPool& pool = PinnedPool::get();
  {
    std::lock_guard<std::mutex> g(pool.mu);
    pool.fork_check();
    if (pid_ != pool.pid) return;  // registered by the parent: nothing of it is this process's to undo
    pool.count(use_, reuse_, bytes_, true, -1);
    pool.count(use_, reuse_, bytes_, false, +1);
  }
  cuda_unregister(data_);
  registered_ = false;
}

PinnedBlock::~PinnedBlock() {
  PinnedPool& pool = PinnedPool::get();
  {
    std::lock_guard<std::mutex> g(pool.mu);
    pool.fork_check();
    if (pid_ != pool.pid) return;  // the parent's block, inherited by a fork: not this process's pool's (see fork_check)
    if (reuse_ == PinnedReuse::pooled) {
      pool.free.emplace(bytes_, Free{data_, registered_, use_});
      pool.count_free(use_, bytes_, +1);
      return;
    }
    pool.count(use_, reuse_, bytes_, registered_, -1);
  }
  if (registered_) cuda_unregister(data_);
  munmap(data_, bytes_);
}

void pinned_note_fixed(const char* use, int64_t bytes) {
  PinnedPool& pool = PinnedPool::get();
  std::lock_guard<std::mutex> g(pool.mu);
  pool.fork_check();  // a child's fixed allocations are its own (the parent's were never made there)
  PinnedUseStats& u = pool.uses[use];
  u.made_bytes += static_cast<uint64_t>(bytes);  // a negative one wraps back: made and freed by the same use
  u.registered_bytes += static_cast<uint64_t>(bytes);
  pool.totals.fixed_bytes += static_cast<uint64_t>(bytes);
  if (u.made_bytes == 0) pool.uses.erase(use);
}

std::vector<std::pair<uintptr_t, size_t>> pinned_pool_free_blocks() {
  PinnedPool& pool = PinnedPool::get();
  std::lock_guard<std::mutex> g(pool.mu);
  pool.fork_check();
  std::vector<std::pair<uintptr_t, size_t>> out;
  for (const auto& kv : pool.free) out.emplace_back(reinterpret_cast<uintptr_t>(kv.second.data), kv.first);
  return out;
}

}  // namespace gpuio::detail

namespace gpuio {

PinnedPoolStats pinned_pool_stats() {
  auto& pool = detail::PinnedPool::get();
  std::lock_guard<std::mutex> g(pool.mu);
  pool.fork_check();
  PinnedPoolStats s = pool.totals;
  s.pools = 1;
  s.page_locked_bytes = s.registered_bytes + s.owned_registered_bytes + s.fixed_bytes;
  s.uses = pool.uses;
  return s;
}

uint64_t pinned_pool_release() {
  auto& pool = detail::PinnedPool::get();
  std::vector<std::pair<size_t, detail::Free>> out;
  {
    std::lock_guard<std::mutex> g(pool.mu);
    pool.fork_check();
    for (auto& kv : pool.free) out.emplace_back(kv.first, kv.second);
    pool.free.clear();
    for (auto& [bytes, f] : out) {
      pool.count_free(f.use, bytes, -1);
      pool.count(f.use, detail::PinnedReuse::pooled, bytes, f.registered, -1);
    }
  }
  uint64_t freed = 0;
  for (auto& [bytes, f] : out) {
    if (f.registered) detail::cuda_unregister(f.data);
    munmap(f.data, bytes);
    freed += bytes;
  }
  return freed;
}

}  // namespace gpuio
