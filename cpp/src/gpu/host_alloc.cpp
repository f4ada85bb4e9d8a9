#include "gpu/host_alloc.hpp"

#include <unistd.h>

#include <mutex>
#include <unordered_map>

#include "engine/pinned_pool.hpp"

namespace gpuio::detail {

namespace {
struct Made {
  size_t bytes;
  const char* use;
  pid_t pid;  // a forked child's pool never counted its parent's
};
std::mutex mu;
// host address -> what was made there; never destroyed (memory may be freed during exit)
std::unordered_map<void*, Made>& made() {
  static auto* m = new std::unordered_map<void*, Made>;
  return *m;
}
}  // namespace

cudaError_t host_alloc(void** host, size_t bytes, unsigned int flags, const char* use) {
  cudaError_t e = cudaHostAlloc(host, bytes, flags);
  if (e != cudaSuccess) return e;
  {
    std::lock_guard<std::mutex> g(mu);
    made()[*host] = {bytes, use, getpid()};
  }
  pinned_note_fixed(use, static_cast<int64_t>(bytes));
  return e;
}

void host_free(void* host) {
  if (host == nullptr) return;
  Made m{0, nullptr, 0};
  {
    std::lock_guard<std::mutex> g(mu);
    auto it = made().find(host);
    if (it != made().end()) {
      m = it->second;
      made().erase(it);
    }
  }
  cudaFreeHost(host);
  if (m.use && m.pid == getpid()) pinned_note_fixed(m.use, -static_cast<int64_t>(m.bytes));
}

}  // namespace gpuio::detail
