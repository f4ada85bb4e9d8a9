// The engine's knobs (one table: name, field, range or choices, doc) and the relations between them. Python reads
// the defaults from a default-constructed EngineOptions through this table and sends every value through
// check_option() before narrowing it, so a value out of range gets this file's message whichever language set it.
#include <limits>
#include <string>

#include "gpuio/engine.hpp"
#include "gpuio/knobs.hpp"
#include "gpuio/status.hpp"

namespace gpuio {

namespace detail {

void knob_out_of_range(const char* name, const std::string& value, int64_t min, int64_t max, bool pow2) {
  throw std::invalid_argument(std::string(name) + "=" + value + (pow2 ? " must be a power of two in [" : " must lie in [") +
                              std::to_string(min) + ", " + std::to_string(max) + "]");
}

void knob_not_a_choice(const char* name, const std::string& value, const char* choices) {
  std::string list = choices;
  for (size_t at = list.find('|'); at != std::string::npos; at = list.find('|', at)) list.replace(at, 1, ", ");
  throw std::invalid_argument(std::string(name) + "='" + value + "' is not one of " + list);
}

void knob_unknown(const std::string& name, const char* table) {
  throw std::invalid_argument("unknown " + std::string(table) + " option '" + name + "'");
}

}  // namespace detail

namespace {

constexpr int64_t u32_max = std::numeric_limits<uint32_t>::max();

}  // namespace

#define FIELD(member) [](EngineOptions& o) -> KnobField { return &o.member; }

const std::vector<Knob<EngineOptions>>& engine_knobs() {
  static const std::vector<Knob<EngineOptions>> table = {
      {"block_size", FIELD(block_size),
       "bytes per logical block, a power of two >= every device's logical block size",
       limits::block_bytes_min, limits::block_bytes_max, "", knob_pow2},
      {"stripe_bytes", FIELD(stripe_bytes), "RAID-0 stripe unit over several paths (a multiple of block_size)",
       limits::block_bytes_min, int64_t{1} << 40, "", knob_per_target},
      {"backend", FIELD(backend.kind),
       "uring | posix | sim | rbd | fault:<backend> (rbd: paths 'rbd:POOL[/NAMESPACE]/IMAGE' select it)"},
      {"workers", FIELD(workers),
       "worker threads; 0 (or None): dynamic: _core.auto_workers(N) threads (CAM's ceil(N/2) at least, up to the "
       "CPUs, at most 8), the controller picks how many work by measured rate (stats()['controller'] says where it "
       "settled); rbd: ceil(N/2) threads",
       0, limits::workers_max},
      {"queue_depth", FIELD(queue_depth), "entries per worker ring", 1, limits::queue_depth_max},
      {"staging_bytes", FIELD(staging_bytes),
       "fixed staging pool (unaligned or GPU buffers and short direct runs go through it)", 4096,
       static_cast<int64_t>(limits::staging_bytes_max)},
      {"staging_slot_bytes", FIELD(staging_slot_bytes), "one staging slot (a multiple of 4096, >= block_size)", 4096,
       limits::io_bytes_max},
      {"ordered_staging_bytes", FIELD(ordered_staging_bytes),
       "shared area for reads into GPU memory: a batch of >= 256 KiB is staged in batch order (a host mirror of "
       "its destination) and copied by 256 KiB chunks, not one copy per block; 0: off. A window that finds the "
       "area full goes through slots (stats(): staging_mode)",
       0, static_cast<int64_t>(limits::staging_bytes_max)},
      {"io_bytes_max", FIELD(io_bytes_max), "contiguous runs are merged up to this many bytes per device request",
       limits::block_bytes_min, limits::io_bytes_max},
      {"io_timeout_ms", FIELD(io_timeout_ms), "a batch not complete by then raises OSError(ETIMEDOUT)", 1, u32_max},
      {"direct_min_bytes", FIELD(direct_min_bytes),
       "O_DIRECT runs shorter than this go through registered staging (cheaper than pinning a fresh page per "
       "small request on virtual disks); 0: never",
       0, limits::io_bytes_max},
      {"low_latency", FIELD(low_latency),
       "a worker with a shallow ring (a few requests) polls for their completions instead of sleeping in the "
       "backend (bounded per wait); auto: on where the process has CPUs to spare for it (workers + 2); stats() "
       "says what ran (latency_mode)",
       1, 0, "auto|on|off"},
      {"direct", FIELD(backend.direct), "O_DIRECT; False goes through the page cache (file systems without O_DIRECT)",
       1, 0, "", knob_per_target},
      {"writable", FIELD(backend.writable), "open devices read-write", 1, 0, "", knob_per_target},
      {"sqpoll", FIELD(backend.sqpoll), "uring: a kernel thread polls the submission queue"},
      {"iopoll", FIELD(backend.iopoll), "uring: polled completions where the device supports them"},
      {"posix_threads", FIELD(backend.posix_threads), "posix backend: pread/pwrite threads per worker queue", 1, 1024},
      {"lock", FIELD(backend.lock), "exclusive flock on every device (single writer; survives kill -9 safely)", 1, 0,
       "", knob_per_target},
      {"lock_wait_ms", FIELD(backend.lock_wait_ms),
       "how long to wait for another holder's lock before OSError(EWOULDBLOCK)", 0, u32_max, "", knob_per_target},
  };
  return table;
}

#undef FIELD

void check_option(const std::string& name, int64_t value) {
  check_knob(find_knob(engine_knobs(), name, "engine"), value);
}

void validate(const EngineOptions& o) {
  check_knobs(engine_knobs(), o);
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
