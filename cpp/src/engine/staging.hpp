// The fixed staging pool: one allocation at start, cut into equal slices (one per worker) of equal slots,
// followed by the ordered area (batch-ordered staging of device-memory reads, limits::ordered_*): units of
// `unit` bytes handed out first-fit as contiguous regions under a mutex (a few calls per batch, none per block).
// A worker owns its slice (no locks). Each worker ring registers its slice as fixed buffer 0; reads into the
// ordered area are plain ones (registering it would pin it in every engine). The allocation is an owned block of the
// process's one pinned pool (engine/pinned_pool.hpp), unmapped with the pool; the CUDA layer registers it in place
// (set_registered) while it is attached.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/pinned_pool.hpp"
#include "gpuio/io.hpp"

namespace gpuio::detail {

class StagingPool {
 public:
  // Throws std::invalid_argument naming the values when slices cannot hold one slot each.
  // ordered_bytes is rounded down to whole units (0: no ordered area).
  StagingPool(uint64_t bytes, uint32_t slot_bytes, uint32_t slices, uint64_t ordered_bytes = 0,
              uint32_t unit = 1u << 18);
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  uint8_t* base() const { return base_; }
  uint64_t bytes() const { return bytes_ + ordered_bytes_; }  // the whole mapping (slices + ordered area)
  uint32_t slot_bytes() const { return slot_bytes_; }
  uint32_t slots_per_slice() const { return slots_per_slice_; }
  uint8_t* slot(uint32_t slice, uint32_t i) const {
    return base_ + (static_cast<uint64_t>(slice) * slots_per_slice_ + i) * slot_bytes_;
  }
  FixedBuffer slice_buffer(uint32_t slice) const {
    return {slot(slice, 0), static_cast<size_t>(slots_per_slice_) * slot_bytes_};
  }

  // Page-locks the whole mapping for CUDA in place (on), or undoes it; false (why: CUDA's words) where refused.
  bool set_registered(bool on, std::string* why = nullptr);

  // The ordered area.
  uint64_t ordered_bytes() const { return ordered_bytes_; }
  uint32_t unit_bytes() const { return unit_; }
  // First fit of `units` contiguous units; nullptr (never blocks) when no such run is free.
  uint8_t* acquire(uint32_t units);
  void release(uint8_t* region, uint32_t units);
  uint32_t units_in_use() const;

 private:
  std::unique_ptr<PinnedBlock> block_;  // the mapping: slices, then the ordered area
  uint8_t* base_ = nullptr;
  uint64_t bytes_ = 0;  // slices
  uint32_t slot_bytes_;
  uint32_t slots_per_slice_;
  uint64_t ordered_bytes_ = 0;
  uint32_t unit_;
  mutable std::mutex area_mu_;
  std::vector<uint8_t> used_;  // per unit
  uint32_t hint_ = 0;          // where the next search starts (next fit keeps the scan short)
  uint32_t in_use_ = 0;
};

}  // namespace gpuio::detail
