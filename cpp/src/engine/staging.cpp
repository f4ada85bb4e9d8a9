#include "engine/staging.hpp"

#include <cerrno>
#include <new>
#include <string>

#include "gpuio/limits.hpp"
#include "gpuio/status.hpp"

namespace gpuio::detail {

StagingPool::StagingPool(uint64_t bytes, uint32_t slot_bytes, uint32_t slices, uint64_t ordered_bytes, uint32_t unit)
    : slot_bytes_(slot_bytes), unit_(unit) {
  GPUIO_EXPECT(slot_bytes >= 4096 && slot_bytes % 4096 == 0,
               "staging_slot_bytes=" + std::to_string(slot_bytes) + " must be a positive multiple of 4096");
  GPUIO_EXPECT(bytes <= limits::staging_bytes_max,
               "staging_bytes=" + std::to_string(bytes) + " exceeds staging_bytes_max=" +
                   std::to_string(limits::staging_bytes_max));
  GPUIO_EXPECT(ordered_bytes <= limits::staging_bytes_max,
               "ordered_staging_bytes=" + std::to_string(ordered_bytes) + " exceeds staging_bytes_max=" +
                   std::to_string(limits::staging_bytes_max));
  GPUIO_EXPECT(unit >= 4096 && unit % 4096 == 0, "ordered staging unit " + std::to_string(unit) +
                                                     " must be a positive multiple of 4096");
  GPUIO_EXPECT(slices > 0, "staging pool needs at least one slice");
  slots_per_slice_ = static_cast<uint32_t>(bytes / slot_bytes / slices);
  GPUIO_EXPECT(slots_per_slice_ > 0, "staging_bytes=" + std::to_string(bytes) + " is too small for " +
                                         std::to_string(slices) + " workers with staging_slot_bytes=" +
                                         std::to_string(slot_bytes));
  bytes_ = static_cast<uint64_t>(slots_per_slice_) * slices * slot_bytes;
  const uint64_t units = ordered_bytes / unit;
  ordered_bytes_ = units * unit;
  used_.assign(units, 0);
  // The slices are touched now (no page fault on the hot path); the ordered area only when CUDA registers it (a
  // GPU path attached) or on first use: an engine that never reads into GPU memory keeps it virtual.
  try {
    block_ = PinnedBlock::take(bytes_ + ordered_bytes_, false, PinnedReuse::owned, "engine_staging", bytes_);
  } catch (const std::bad_alloc&) {
    throw IoError(ENOMEM, "cannot allocate the staging pool of " + std::to_string(bytes_ + ordered_bytes_) + " bytes");
  }
  base_ = block_->data();
}

bool StagingPool::set_registered(bool on, std::string* why) {
  if (!on) {
    block_->unregister_now();
    return true;
  }
  return block_->register_now(why);
}

uint8_t* StagingPool::acquire(uint32_t units) {
  const uint32_t n = static_cast<uint32_t>(used_.size());
  if (units == 0 || units > n) return nullptr;
  std::lock_guard<std::mutex> g(area_mu_);
  if (n - in_use_ < units) return nullptr;
  // Next fit from the hint, wrapping once: regions are freed roughly in the order they were taken.
  for (uint32_t pass = 0; pass < 2; ++pass) {
    uint32_t from = pass == 0 ? hint_ : 0, to = pass == 0 ? n : std::min(n, hint_ + units - 1);
    uint32_t run = 0;
    for (uint32_t i = from; i < to; ++i) {
      run = used_[i] ? 0 : run + 1;
      if (run == units) {
        uint32_t first = i + 1 - units;
        for (uint32_t k = first; k <= i; ++k) used_[k] = 1;
        in_use_ += units;
        hint_ = (i + 1) % n;
        return base_ + bytes_ + static_cast<uint64_t>(first) * unit_;
      }
    }
  }
  return nullptr;
}

void StagingPool::release(uint8_t* region, uint32_t units) {
  const uint64_t first = static_cast<uint64_t>(region - (base_ + bytes_)) / unit_;
  std::lock_guard<std::mutex> g(area_mu_);
  GPUIO_ASSERT(first + units <= used_.size(), "ordered staging region outside the area");
  for (uint64_t k = first; k < first + units; ++k) {
    GPUIO_ASSERT(used_[k], "ordered staging region released twice");
    used_[k] = 0;
  }
  in_use_ -= units;
}

uint32_t StagingPool::units_in_use() const {
  std::lock_guard<std::mutex> g(area_mu_);
  return in_use_;
}

}  // namespace gpuio::detail
