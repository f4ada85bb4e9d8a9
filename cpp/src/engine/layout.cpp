#include "engine/layout.hpp"

#include <algorithm>
#include <string>

#include "gpuio/status.hpp"

namespace gpuio::detail {

Layout::Layout(const std::vector<uint64_t>& device_bytes, uint32_t block_bytes, uint64_t stripe_bytes)
    : devices_(device_bytes.size()), block_bytes_(block_bytes), stripe_bytes_(stripe_bytes) {
  GPUIO_EXPECT(devices_ > 0, "a layout needs at least one device");
  GPUIO_EXPECT(block_bytes > 0 && stripe_bytes >= block_bytes && stripe_bytes % block_bytes == 0,
               "stripe_bytes=" + std::to_string(stripe_bytes) + " must be a positive multiple of block_size=" +
                   std::to_string(block_bytes));
  blocks_per_stripe_ = stripe_bytes / block_bytes;
  uint64_t smallest = *std::min_element(device_bytes.begin(), device_bytes.end());
  if (devices_ == 1) {
    total_blocks_ = smallest / block_bytes;
  } else {
    total_blocks_ = (smallest / stripe_bytes) * devices_ * blocks_per_stripe_;  // whole stripes only
  }
  GPUIO_EXPECT(total_blocks_ > 0, "devices too small: the smallest holds " + std::to_string(smallest) +
                                      " bytes, less than one " +
                                      std::to_string(devices_ == 1 ? block_bytes : stripe_bytes) + "-byte unit");
}

}  // namespace gpuio::detail
