// The fixed staging pool: one allocation at start, cut into equal slices (one per worker) of equal slots.
// A worker owns its slice (no locks). The whole pool is registered as one fixed buffer per worker ring,
// and (GPU builds) with CUDA as mapped pinned memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpuio/io.hpp"

namespace gpuio::detail {

class StagingPool {
 public:
  // Throws std::invalid_argument naming the values when slices cannot hold one slot each.
  StagingPool(uint64_t bytes, uint32_t slot_bytes, uint32_t slices);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  uint8_t* base() const { return base_; }
  uint64_t bytes() const { return bytes_; }
  uint32_t slot_bytes() const { return slot_bytes_; }
  uint32_t slots_per_slice() const { return slots_per_slice_; }
  uint8_t* slot(uint32_t slice, uint32_t i) const {
    return base_ + (static_cast<uint64_t>(slice) * slots_per_slice_ + i) * slot_bytes_;
  }
  FixedBuffer slice_buffer(uint32_t slice) const {
    return {slot(slice, 0), static_cast<size_t>(slots_per_slice_) * slot_bytes_};
  }

 private:
  uint8_t* base_ = nullptr;
  uint64_t bytes_ = 0;
  uint32_t slot_bytes_;
  uint32_t slots_per_slice_;
};

}  // namespace gpuio::detail
