// The fault backend wraps any backend and, from a seed, injects the failures real devices have.
// Every decision is a pure function of (seed, device, offset, length, op) of the request, so a seeded run
// reproduces whatever the thread timing (a failing offset fails every time, like a bad sector). Only
// disappear_after counts requests, over all queues. What each fault looks like to the engine's user:
//   eio          -> the batch fails with EIO naming the block
//   short I/O    -> the engine resubmits the rest; the batch succeeds (a short read is never silent)
//   latency      -> the batch succeeds, later
//   torn write   -> a prefix of the data reaches the device, then EIO naming the block
//   disappear    -> from the N-th request on, every request to that device fails with ENODEV
#pragma once
#include <cstdint>

namespace gpuio {

struct FaultOptions {
  uint64_t seed = 1;
  double eio_rate = 0.0;          // per request
  double short_rate = 0.0;        // per request: transfer a random non-empty prefix only
  double latency_rate = 0.0;      // per request: complete latency_us later
  uint32_t latency_us = 0;
  double torn_write_rate = 0.0;   // per write request
  int64_t disappear_after = -1;   // requests (over all queues) before the device disappears; -1: never
  int32_t disappear_device = -1;  // which device disappears; -1: all
  uint64_t bytes_per_s = 0;       // per-queue bandwidth cap for emulated devices; 0: none
};

}  // namespace gpuio
