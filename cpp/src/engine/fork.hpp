// Which fork of the process we are in: a counter that a pthread_atfork child handler bumps, so objects that own
// threads can tell, without a system call per use, that they were inherited by a forked child (which has none of
// their threads).
#pragma once
#include <cstdint>

namespace gpuio::detail {

// 0 in the process that loaded gpuio; +1 in each forked child (and its children, again).
uint32_t fork_generation();

}  // namespace gpuio::detail
