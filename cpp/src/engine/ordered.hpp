// Batch-ordered staging of one device-memory read batch (limits::ordered_*): per window of the batch one
// contiguous region of the staging pool's ordered area, a host mirror of the destination window (block i of
// the batch lands at region + (i - window start) * block_size). The region is cut into chunks; each chunk counts
// the bytes still to land. The worker whose completion brings a chunk to zero queues one copy of the chunk on
// its DeviceMover stream; when that copy lands, the worker finishes the chunk (one Batch::extent_finished for
// all of its extents), and the last chunk of a window gives the region back. Extents of one chunk come from
// several workers: the counters are atomics, failures go through Batch::record_failure (a mutex).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>

namespace gpuio::detail {

struct Batch;
struct OrderedWindow;

struct OrderedChunk {
  OrderedWindow* window = nullptr;
  uint8_t* host = nullptr;  // in the ordered area
  uint8_t* dst = nullptr;   // in the batch's device memory
  uint32_t len = 0;
  uint64_t first_index = 0;  // the chunk's first block: named if its copy fails
  int64_t first_block = 0;
  uint32_t first_device = 0;
  uint64_t first_offset = 0;
  std::atomic<uint32_t> pending{0};  // bytes not yet landed in host (failed extents count as landed, as zeros)
};

struct OrderedWindow {
  Batch* batch = nullptr;
  uint8_t* region = nullptr;
  uint32_t units = 0;
  std::atomic<uint32_t> chunks_left{0};  // chunks not yet copied (or abandoned)
  std::unique_ptr<OrderedChunk[]> chunks;
  uint32_t chunk_count = 0;
};

}  // namespace gpuio::detail
