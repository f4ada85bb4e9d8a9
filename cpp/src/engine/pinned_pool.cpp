// The process's one pinned pool (gpu/host/pipeline.hpp): blocks in 2 MiB pages, kept from one use to the next
// (mapping, faulting in and registering pages is a cost per block, not per read).
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "gpu/host/pipeline.hpp"
#include "gpuio/plan_reader.hpp"

namespace gpuio::detail {

namespace {
constexpr size_t kHuge = 2u << 20;

struct Free {
  uint8_t* data;
  bool registered;
};
}  // namespace

struct PinnedPool {
  std::mutex mu;
  std::multimap<size_t, Free> free;  // bytes -> blocks not in use
  uint64_t made = 0, registered = 0, free_bytes = 0;
  pid_t pid = getpid();

  static PinnedPool& get() {
    static PinnedPool* pool = new PinnedPool;  // never destroyed: blocks may come back during exit
    return *pool;
  }

  void fork_check() {  // a forked child's copies were never registered here: it starts its own
    if (pid != getpid()) {
      free.clear();
      made = registered = free_bytes = 0;
      pid = getpid();
    }
  }
};

static bool register_block(uint8_t* p, size_t bytes) {
#ifdef GPUIO_HAVE_CUDA
  return cuda_register_host(p, bytes);
#else
  (void)p;
  (void)bytes;
  return false;
#endif
}

std::unique_ptr<PinnedBlock> PinnedBlock::take(size_t bytes, bool want_registered) {
  bytes = (bytes + kHuge - 1) / kHuge * kHuge;
  PinnedPool& pool = PinnedPool::get();
  uint8_t* data = nullptr;
  bool reg = false;
  {
    std::lock_guard<std::mutex> g(pool.mu);
    pool.fork_check();
    auto it = pool.free.find(bytes);
    if (it != pool.free.end()) {
      data = it->second.data;
      reg = it->second.registered;
      pool.free.erase(it);
      pool.free_bytes -= bytes;
    }
  }
  if (data == nullptr) {
    void* m = mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    uint8_t* raw = static_cast<uint8_t*>(m);
    uint8_t* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) / kHuge * kHuge);
    if (aligned > raw) munmap(raw, aligned - raw);  // keep exactly [aligned, aligned + bytes)
    uint8_t* end = raw + bytes + kHuge;
    if (end > aligned + bytes) munmap(aligned + bytes, end - (aligned + bytes));
    madvise(aligned, bytes, MADV_HUGEPAGE);
    for (size_t i = 0; i < bytes; i += 4096) aligned[i] = 0;  // fault in (2 MiB pages where possible) before pinning
    data = aligned;
    std::lock_guard<std::mutex> g(PinnedPool::get().mu);
    pool.made += bytes;
  }
  if (want_registered && !reg && register_block(data, bytes)) {
    reg = true;
    std::lock_guard<std::mutex> g(pool.mu);
    pool.registered += bytes;
  }
  return std::unique_ptr<PinnedBlock>(new PinnedBlock(data, bytes, reg));
}

PinnedBlock::~PinnedBlock() {
  PinnedPool& pool = PinnedPool::get();
  std::lock_guard<std::mutex> g(pool.mu);
  if (pool.pid != getpid()) return;  // taken by the parent before a fork: not this process's pool's
  pool.free.emplace(bytes_, Free{data_, registered_});
  pool.free_bytes += bytes_;
}

}  // namespace gpuio::detail

namespace gpuio {

PinnedPoolStats pinned_pool_stats() {
  auto& pool = detail::PinnedPool::get();
  std::lock_guard<std::mutex> g(pool.mu);
  pool.fork_check();
  return {pool.made, pool.registered, pool.free_bytes};
}

uint64_t pinned_pool_release() {
  auto& pool = detail::PinnedPool::get();
  std::vector<std::pair<size_t, detail::Free>> out;
  {
    std::lock_guard<std::mutex> g(pool.mu);
    pool.fork_check();
    for (auto& kv : pool.free) out.emplace_back(kv.first, kv.second);
    pool.free.clear();
    pool.free_bytes = 0;
    for (auto& [bytes, f] : out) {
      pool.made -= bytes;
      if (f.registered) pool.registered -= bytes;
    }
  }
  uint64_t freed = 0;
  for (auto& [bytes, f] : out) {
#ifdef GPUIO_HAVE_CUDA
    if (f.registered) detail::cuda_unregister_host(f.data);
#endif
    munmap(f.data, bytes);
    freed += bytes;
  }
  return freed;
}

}  // namespace gpuio
