// The engine's knobs: ranges by name (one table), and the relations between them. Python reads the
// defaults from a default-constructed EngineOptions and sends every value through check_option() before
// narrowing it, so a value out of range gets this file's message whichever language set it.
#include <limits>
#include <string>

#include "gpuio/engine.hpp"
#include "gpuio/status.hpp"

namespace gpuio {
namespace {

constexpr int64_t u32_max = std::numeric_limits<uint32_t>::max();

std::string range_text(const OptionRange& r) {
  return "[" + std::to_string(r.min) + ", " + std::to_string(r.max) + "]";
}

const OptionRange& range_of(const std::string& name) {
  for (const OptionRange& r : engine_option_ranges())
    if (name == r.name) return r;
  throw std::invalid_argument("unknown engine option '" + name + "'");
}

}  // namespace

const std::vector<OptionRange>& engine_option_ranges() {
  static const std::vector<OptionRange> ranges = {
      {"block_size", limits::block_bytes_min, limits::block_bytes_max},
      {"stripe_bytes", limits::block_bytes_min, int64_t{1} << 40},
      {"workers", 0, limits::workers_max},
      {"queue_depth", 1, limits::queue_depth_max},
      {"staging_bytes", 4096, static_cast<int64_t>(limits::staging_bytes_max)},
      {"staging_slot_bytes", 4096, limits::io_bytes_max},
      {"ordered_staging_bytes", 0, static_cast<int64_t>(limits::staging_bytes_max)},
      {"io_bytes_max", limits::block_bytes_min, limits::io_bytes_max},
      {"io_timeout_ms", 1, u32_max},
      {"direct_min_bytes", 0, limits::io_bytes_max},
      {"posix_threads", 1, 1024},
      {"lock_wait_ms", 0, u32_max},
  };
  return ranges;
}

void check_option(const std::string& name, int64_t value) {
  const OptionRange& r = range_of(name);
  bool pow2 = value > 0 && (value & (value - 1)) == 0;
  if (name == "block_size") {
    GPUIO_EXPECT(value >= r.min && value <= r.max && pow2,
                 name + "=" + std::to_string(value) + " must be a power of two in " + range_text(r));
    return;
  }
  GPUIO_EXPECT(value >= r.min && value <= r.max, name + "=" + std::to_string(value) + " must lie in " + range_text(r));
}

void validate(const EngineOptions& o) {
  check_option("block_size", o.block_size);
  check_option("stripe_bytes", static_cast<int64_t>(o.stripe_bytes));
  check_option("workers", o.workers);
  check_option("queue_depth", o.queue_depth);
  check_option("staging_bytes", static_cast<int64_t>(o.staging_bytes));
  check_option("staging_slot_bytes", o.staging_slot_bytes);
  check_option("ordered_staging_bytes", static_cast<int64_t>(o.ordered_staging_bytes));
  check_option("io_bytes_max", o.io_bytes_max);
  check_option("io_timeout_ms", o.io_timeout_ms);
  check_option("direct_min_bytes", o.direct_min_bytes);
  GPUIO_EXPECT(o.low_latency == "auto" || o.low_latency == "on" || o.low_latency == "off",
               "low_latency='" + o.low_latency + "' must be one of auto, on, off");
  check_option("posix_threads", o.backend.posix_threads);
  check_option("lock_wait_ms", o.backend.lock_wait_ms);
  const std::string bs = std::to_string(o.block_size);
  GPUIO_EXPECT(o.stripe_bytes % o.block_size == 0,
               "stripe_bytes=" + std::to_string(o.stripe_bytes) + " must be a multiple of block_size=" + bs);
  GPUIO_EXPECT(o.io_bytes_max >= o.block_size,
               "io_bytes_max=" + std::to_string(o.io_bytes_max) + " is smaller than block_size=" + bs);
  GPUIO_EXPECT(o.staging_slot_bytes % 4096 == 0,
               "staging_slot_bytes=" + std::to_string(o.staging_slot_bytes) + " must be a multiple of 4096");
  GPUIO_EXPECT(o.staging_slot_bytes >= o.block_size,
               "staging_slot_bytes=" + std::to_string(o.staging_slot_bytes) + " is smaller than block_size=" + bs);
  GPUIO_EXPECT(o.staging_bytes >= o.staging_slot_bytes,
               "staging_bytes=" + std::to_string(o.staging_bytes) + " is smaller than staging_slot_bytes=" +
                   std::to_string(o.staging_slot_bytes));
  GPUIO_EXPECT(o.direct_min_bytes <= o.staging_slot_bytes,
               "direct_min_bytes=" + std::to_string(o.direct_min_bytes) + " exceeds staging_slot_bytes=" +
                   std::to_string(o.staging_slot_bytes) + " (a staged extent must fit one slot)");
}

}  // namespace gpuio
