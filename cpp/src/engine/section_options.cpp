// The knobs of the engine's backend sections: the sim=, fault= and rbd= dicts of gpuio.Engine (SimOptions,
// FaultOptions, RbdOptions). Ranges here are the field types' unless stated; each backend checks the relations
// between its own knobs when it opens (sim_backend.cpp, fault_backend.cpp, rbd_backend.cpp).
#include <limits>
#include <string>

#include "gpuio/fault.hpp"
#include "gpuio/io.hpp"
#include "gpuio/knobs.hpp"

namespace gpuio {

#define FIELD(Options, member) [](Options& o) -> KnobField { return &o.member; }

const std::vector<Knob<SimOptions>>& sim_knobs() {
  static const std::vector<Knob<SimOptions>> table = {
      {"preset", FIELD(SimOptions, preset), "flash model: znand | tlc (gpuio.sim.presets())"},
      {"device_bytes", FIELD(SimOptions, device_bytes), "capacity of each device (>= 1 MiB, a multiple of 4096)"},
      {"paced", FIELD(SimOptions, paced), "completions wait for the model's time in real time; False: free-running"},
      {"backing_dir", FIELD(SimOptions, backing_dir),
       "'': data in memory (sparse, zeros until written); else one file per device in this folder"},
      {"channels", FIELD(SimOptions, channels), "0: the preset's; else fewer or more flash channels"},
      {"write_buffer_pages", FIELD(SimOptions, write_buffer_pages),
       "-1: the preset's DRAM write buffer; 0: none (writes wait for the program)"},
      {"seed", FIELD(SimOptions, seed), "seed of the model's random choices"},
      {"null", FIELD(SimOptions, null),
       "zero-latency devices (no model, no data moved): measures the engine alone"},
      {"null_paced", FIELD(SimOptions, null_paced),
       "devices with a latency and a link rate of their own (latency_ns, link_mb_s) but no model and no data "
       "moved on the host (reads leave the buffers as they were), like drives that do their work in hardware"},
      {"latency_ns", FIELD(SimOptions, latency_ns), "null_paced: a read's latency on an idle device; 0: the preset's"},
      {"link_mb_s", FIELD(SimOptions, link_mb_s), "null_paced: the device's rate in MB/s; 0: the preset's host link"},
  };
  return table;
}

const std::vector<Knob<FaultOptions>>& fault_knobs() {
  static const std::vector<Knob<FaultOptions>> table = {
      {"seed", FIELD(FaultOptions, seed), "seed of the injected faults (a run is reproduced by its seed)"},
      {"eio_rate", FIELD(FaultOptions, eio_rate), "share of requests failing with EIO"},
      {"short_rate", FIELD(FaultOptions, short_rate), "share of requests transferring a random non-empty prefix only"},
      {"latency_rate", FIELD(FaultOptions, latency_rate), "share of requests completing latency_us later"},
      {"latency_us", FIELD(FaultOptions, latency_us), "the added latency of those requests"},
      {"torn_write_rate", FIELD(FaultOptions, torn_write_rate), "share of write requests torn"},
      {"disappear_after", FIELD(FaultOptions, disappear_after),
       "requests (over all queues) before the device disappears; -1: never"},
      {"disappear_device", FIELD(FaultOptions, disappear_device), "which device disappears; -1: all"},
      {"bytes_per_s", FIELD(FaultOptions, bytes_per_s), "per-queue bandwidth cap for emulated devices; 0: none"},
  };
  return table;
}

const std::vector<Knob<RbdOptions>>& rbd_knobs() {
  static const std::vector<Knob<RbdOptions>> table = {
      {"conf", FIELD(RbdOptions, conf), "ceph.conf path ('': CEPH_CONF, else /etc/ceph/ceph.conf)"},
      {"user", FIELD(RbdOptions, user), "cephx id without 'client.' ('': client.admin or CEPH_ARGS --id)"},
      {"keyring", FIELD(RbdOptions, keyring), "keyring path ('': the rbd tool's default)"},
      {"exclusive", FIELD(RbdOptions, exclusive), "a writable engine takes the volume's exclusive lock (single writer)"},
      {"lock_wait_ms", FIELD(RbdOptions, lock_wait_ms), "retry a lock held by another live writer this long, then EBUSY"},
      {"break_lock", FIELD(RbdOptions, break_lock),
       "break the current owner's lock (blocklisting it: fencing) and take it"},
      {"timeout_s", FIELD(RbdOptions, timeout_s), "connecting and mon commands fail (ETIMEDOUT) after this"},
      {"op_timeout_s", FIELD(RbdOptions, op_timeout_s),
       "an OSD request fails with ETIMEDOUT after this; 0: waits for recovery"},
  };
  return table;
}

#undef FIELD

}  // namespace gpuio
