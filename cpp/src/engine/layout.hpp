// Maps logical blocks to (device, byte offset): one device, or RAID-0 stripes of stripe_bytes over N.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpuio::detail {

struct Location {
  uint32_t device;
  uint64_t offset;
};

class Layout {
 public:
  // Throws std::invalid_argument naming the bad value (stripe not a multiple of the block, devices too small).
  Layout(const std::vector<uint64_t>& device_bytes, uint32_t block_bytes, uint64_t stripe_bytes);

  uint64_t total_blocks() const { return total_blocks_; }
  uint32_t block_bytes() const { return block_bytes_; }
  size_t devices() const { return devices_; }

  Location map(uint64_t block) const {
    if (devices_ == 1) return {0, block * block_bytes_};
    uint64_t stripe = block / blocks_per_stripe_;
    uint64_t within = block % blocks_per_stripe_;
    return {static_cast<uint32_t>(stripe % devices_), (stripe / devices_) * stripe_bytes_ + within * block_bytes_};
  }
  // How many blocks from `block` on lie contiguously on one device (block itself included).
  uint64_t contiguous_from(uint64_t block) const {
    if (devices_ == 1) return total_blocks_ - block;
    return blocks_per_stripe_ - block % blocks_per_stripe_;
  }

 private:
  size_t devices_;
  uint32_t block_bytes_;
  uint64_t stripe_bytes_;
  uint64_t blocks_per_stripe_;
  uint64_t total_blocks_;
};

}  // namespace gpuio::detail
