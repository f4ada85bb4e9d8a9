#include "engine/staging.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <string>

#include "gpuio/limits.hpp"
#include "gpuio/status.hpp"

namespace gpuio::detail {

StagingPool::StagingPool(uint64_t bytes, uint32_t slot_bytes, uint32_t slices) : slot_bytes_(slot_bytes) {
  GPUIO_EXPECT(slot_bytes >= 4096 && slot_bytes % 4096 == 0,
               "staging_slot_bytes=" + std::to_string(slot_bytes) + " must be a positive multiple of 4096");
  GPUIO_EXPECT(bytes <= limits::staging_bytes_max,
               "staging_bytes=" + std::to_string(bytes) + " exceeds staging_bytes_max=" +
                   std::to_string(limits::staging_bytes_max));
  GPUIO_EXPECT(slices > 0, "staging pool needs at least one slice");
  slots_per_slice_ = static_cast<uint32_t>(bytes / slot_bytes / slices);
  GPUIO_EXPECT(slots_per_slice_ > 0, "staging_bytes=" + std::to_string(bytes) + " is too small for " +
                                         std::to_string(slices) + " workers with staging_slot_bytes=" +
                                         std::to_string(slot_bytes));
  bytes_ = static_cast<uint64_t>(slots_per_slice_) * slices * slot_bytes;
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) throw IoError(errno, "cannot allocate the staging pool of " + std::to_string(bytes_) + " bytes");
  madvise(p, bytes_, MADV_HUGEPAGE);
  base_ = static_cast<uint8_t*>(p);
}

StagingPool::~StagingPool() {
  if (base_) munmap(base_, bytes_);
}

}  // namespace gpuio::detail
