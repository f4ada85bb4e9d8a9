#include "engine/fork.hpp"

#include <pthread.h>

#include <atomic>

namespace gpuio::detail {
namespace {

std::atomic<uint32_t> generation{0};

void in_child() { generation.fetch_add(1, std::memory_order_relaxed); }

// Registered when the library loads, before any engine exists.
const int registered = pthread_atfork(nullptr, nullptr, &in_child);

}  // namespace

uint32_t fork_generation() {
  (void)registered;
  return generation.load(std::memory_order_relaxed);
}

}  // namespace gpuio::detail
