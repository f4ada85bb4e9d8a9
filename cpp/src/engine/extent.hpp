// An extent: one device request after the caller's blocks were mapped and contiguous runs merged.
#pragma once
#include <cstdint>

#include "gpuio/io.hpp"
#include "engine/batch.hpp"
#include "engine/ordered.hpp"

namespace gpuio::detail {

struct Extent {
  Batch* batch = nullptr;
  uint8_t* mem = nullptr;    // the batch's memory for this extent (destination of a read, source of a write)
  uint64_t offset = 0;       // on the device
  uint64_t first_index = 0;  // position of the extent's first block in the batch
  int64_t first_block = 0;
  uint32_t len = 0;
  uint16_t device = 0;
  IoOp op = IoOp::read;
  bool staged = false;       // goes through a staging slot (unaligned or non-host memory)
  OrderedChunk* chunk = nullptr;  // batch-ordered staging: lands at chunk->host + (mem - chunk->dst), no slot

  // The extent failed with err after done_bytes had landed: the batch's failure names the first block not
  // fully done (its index in the batch, its id, device and offset).
  void fail(uint32_t done_bytes, uint32_t block_size, int err) const {
    const uint64_t k = done_bytes / block_size;
    batch->record_failure(
        {first_index + k, first_block + static_cast<int64_t>(k), device, offset + k * block_size, err});
  }
};

}  // namespace gpuio::detail
