// gpuio._core.Engine: the C++ engine behind gpuio.Engine (python/gpuio/engine.py). Buffers arrive as arrays
// (nb::ndarray, checked in bindings/arrays.hpp); options, their defaults and their checks live in C++. Waits
// and submissions release the GIL.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/vector.h>

#include <sched.h>
#include <unistd.h>

#include <set>

#include "bindings/arrays.hpp"
#include "bindings/engine_holder.hpp"
#include "bindings/options.hpp"
#include "bindings/registry.hpp"
#include "gpuio/crc32c.hpp"
#include "gpuio/engine.hpp"

namespace nb = nanobind;
using namespace gpuio;

namespace {

// Owns the engine; the Python object's lifetime ends it (close() first stops the workers).
using Holder = bindings::EngineHolder;
using bindings::copy_dict;
using bindings::reject_unknown;
using bindings::take;
using bindings::take_section;

FaultOptions fault_options(nb::dict d) {
  FaultOptions f;
  f.seed = take<uint64_t>(d, "seed", f.seed);
  f.eio_rate = take<double>(d, "eio_rate", f.eio_rate);
  f.short_rate = take<double>(d, "short_rate", f.short_rate);
  f.latency_rate = take<double>(d, "latency_rate", f.latency_rate);
  f.latency_us = take<uint32_t>(d, "latency_us", f.latency_us);
  f.torn_write_rate = take<double>(d, "torn_write_rate", f.torn_write_rate);
  f.disappear_after = take<int64_t>(d, "disappear_after", f.disappear_after);
  f.disappear_device = take<int32_t>(d, "disappear_device", f.disappear_device);
  f.bytes_per_s = take<uint64_t>(d, "bytes_per_s", f.bytes_per_s);
  reject_unknown(d, "fault");
  return f;
}

SimOptions sim_options(nb::dict d) {
  SimOptions s;
  s.preset = take<std::string>(d, "preset", s.preset);
  s.device_bytes = take<uint64_t>(d, "device_bytes", s.device_bytes);
  s.paced = take<bool>(d, "paced", s.paced);
  s.backing_dir = take<std::string>(d, "backing_dir", s.backing_dir);
  s.channels = take<uint32_t>(d, "channels", s.channels);
  s.write_buffer_pages = take<int64_t>(d, "write_buffer_pages", s.write_buffer_pages);
  s.seed = take<uint64_t>(d, "seed", s.seed);
  s.null = take<bool>(d, "null", s.null);
  s.null_paced = take<bool>(d, "null_paced", s.null_paced);
  s.latency_ns = take<uint64_t>(d, "latency_ns", s.latency_ns);
  s.link_mb_s = take<uint32_t>(d, "link_mb_s", s.link_mb_s);
  reject_unknown(d, "sim");
  return s;
}

RbdOptions rbd_options(nb::dict d) {
  RbdOptions r;
  r.conf = take<std::string>(d, "conf", r.conf);
  r.user = take<std::string>(d, "user", r.user);
  r.keyring = take<std::string>(d, "keyring", r.keyring);
  r.exclusive = take<bool>(d, "exclusive", r.exclusive);
  r.lock_wait_ms = take<uint32_t>(d, "lock_wait_ms", r.lock_wait_ms);
  r.break_lock = take<bool>(d, "break_lock", r.break_lock);
  r.timeout_s = take<uint32_t>(d, "timeout_s", r.timeout_s);
  r.op_timeout_s = take<uint32_t>(d, "op_timeout_s", r.op_timeout_s);
  reject_unknown(d, "rbd");
  return r;
}

// Options arrive as a dict of the keywords gpuio.Engine was given (the others keep the C++ defaults);
// integers are range-checked by gpuio::check_option before narrowing, relations by gpuio::validate in
// Engine::create, so the error text is C++'s whichever side set the value. Leftover keys are typos.
EngineOptions engine_options(std::vector<std::string> paths, nb::dict given) {
  nb::dict d = copy_dict(given);
  EngineOptions o;
  o.paths = std::move(paths);
  auto range = [](const std::string& key, int64_t v) { check_option(key, v); };
  o.block_size = take<uint32_t>(d, "block_size", o.block_size, range);
  o.stripe_bytes = take<uint64_t>(d, "stripe_bytes", o.stripe_bytes, range);
  o.backend.kind = take<std::string>(d, "backend", o.backend.kind);
  if (d.contains("workers") && d["workers"].is_none()) nb::del(d["workers"]);  // None: dynamic (0)
  o.workers = take<uint32_t>(d, "workers", o.workers, range);
  o.queue_depth = take<uint32_t>(d, "queue_depth", o.queue_depth, range);
  o.staging_bytes = take<uint64_t>(d, "staging_bytes", o.staging_bytes, range);
  o.staging_slot_bytes = take<uint32_t>(d, "staging_slot_bytes", o.staging_slot_bytes, range);
  o.ordered_staging_bytes = take<uint64_t>(d, "ordered_staging_bytes", o.ordered_staging_bytes, range);
  o.io_bytes_max = take<uint32_t>(d, "io_bytes_max", o.io_bytes_max, range);
  o.io_timeout_ms = take<uint32_t>(d, "io_timeout_ms", o.io_timeout_ms, range);
  o.direct_min_bytes = take<uint32_t>(d, "direct_min_bytes", o.direct_min_bytes, range);
  o.low_latency = take<std::string>(d, "low_latency", o.low_latency);
  o.backend.direct = take<bool>(d, "direct", o.backend.direct);
  o.backend.writable = take<bool>(d, "writable", o.backend.writable);
  o.backend.sqpoll = take<bool>(d, "sqpoll", o.backend.sqpoll);
  o.backend.iopoll = take<bool>(d, "iopoll", o.backend.iopoll);
  o.backend.posix_threads = take<uint32_t>(d, "posix_threads", o.backend.posix_threads, range);
  o.backend.lock = take<bool>(d, "lock", o.backend.lock);
  o.backend.lock_wait_ms = take<uint32_t>(d, "lock_wait_ms", o.backend.lock_wait_ms, range);
  if (auto s = take_section(d, "sim")) o.backend.sim = sim_options(*s);
  if (auto f = take_section(d, "fault")) {
    if (o.backend.kind.rfind("fault:", 0) != 0)
      throw std::invalid_argument("fault options given but backend='" + o.backend.kind + "'; use backend='fault:" +
                                  o.backend.kind + "'");
    o.backend.fault = fault_options(*f);
  }
  if (auto r = take_section(d, "rbd")) o.backend.rbd = rbd_options(*r);
  reject_unknown(d, "engine");
  return o;
}

// The defaults of every gpuio.Engine keyword, read from a default-constructed EngineOptions (KvikIO's
// way: Python restates none of them). sim and fault are sections, None unless given.
nb::dict engine_defaults() {
  EngineOptions o;
  nb::dict d;
  d["block_size"] = o.block_size;
  d["stripe_bytes"] = o.stripe_bytes;
  d["backend"] = o.backend.kind;
  d["workers"] = o.workers;
  d["queue_depth"] = o.queue_depth;
  d["staging_bytes"] = o.staging_bytes;
  d["staging_slot_bytes"] = o.staging_slot_bytes;
  d["ordered_staging_bytes"] = o.ordered_staging_bytes;
  d["io_bytes_max"] = o.io_bytes_max;
  d["io_timeout_ms"] = o.io_timeout_ms;
  d["direct_min_bytes"] = o.direct_min_bytes;
  d["low_latency"] = o.low_latency;
  d["direct"] = o.backend.direct;
  d["writable"] = o.backend.writable;
  d["sqpoll"] = o.backend.sqpoll;
  d["iopoll"] = o.backend.iopoll;
  d["posix_threads"] = o.backend.posix_threads;
  d["lock"] = o.backend.lock;
  d["lock_wait_ms"] = o.backend.lock_wait_ms;
  d["sim"] = nb::none();
  d["fault"] = nb::none();
  d["rbd"] = nb::none();
  return d;
}

// The table layer's engine policy (limits.hpp), for this machine: gpuio.TensorFile reads it, restates none.
nb::dict table_defaults() {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  nb::dict d;
  d["workers"] = limits::table_workers(online < 1 ? 1u : static_cast<uint32_t>(online));
  d["request_blocks_max"] = limits::table_request_blocks_max;
  return d;
}

// workers=0: the worker threads an engine over `devices` devices starts in this process (limits::auto_worker_threads
// of the CPUs the process may use; local backends: rbd keeps ceil(N/2)) and the count its controller starts from.
nb::dict auto_workers(uint32_t devices) {
  cpu_set_t set;
  uint32_t cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? static_cast<uint32_t>(CPU_COUNT(&set)) : 1;
  nb::dict d;
  uint32_t threads = limits::auto_worker_threads(devices, cpus);
  d["threads"] = threads;
  d["start"] = limits::auto_workers_start(devices, threads);
  return d;
}

nb::dict device_dict(const DeviceInfo& d) {
  nb::dict x;
  x["path"] = d.path;
  x["bytes"] = d.bytes;
  x["logical_block_bytes"] = d.logical_block_bytes;
  x["direct"] = d.direct;
  x["block_device"] = d.block_device;
  return x;
}

// A target's per-file options (the rest of a file's settings are the engine's): direct, writable, lock, lock_wait_ms,
// stripe_bytes; defaults from TargetOptions, ranges from the engine's option table.
TargetOptions target_options(std::vector<std::string> paths, nb::dict given) {
  nb::dict d = copy_dict(given);
  TargetOptions t;
  t.paths = std::move(paths);
  auto range = [](const std::string& key, int64_t v) { check_option(key, v); };
  t.stripe_bytes = take<uint64_t>(d, "stripe_bytes", t.stripe_bytes, range);
  t.open.direct = take<bool>(d, "direct", t.open.direct);
  t.open.writable = take<bool>(d, "writable", t.open.writable);
  t.open.lock = take<bool>(d, "lock", t.open.lock);
  t.open.lock_wait_ms = take<uint32_t>(d, "lock_wait_ms", t.open.lock_wait_ms, range);
  reject_unknown(d, "target");
  return t;
}

nb::dict stats_dict(const EngineStats& s) {
  nb::dict d;
  d["ops"] = s.ops;
  d["bytes"] = s.bytes;
  d["batches"] = s.batches;
  d["blocks"] = s.blocks;
  d["busy_worker_seconds"] = s.busy_worker_seconds;
  d["worker_cpu_seconds"] = s.worker_cpu_seconds;
  d["active_workers"] = s.active_workers;
  d["workers"] = s.workers;
  d["queue_full_events"] = s.queue_full_events;
  d["staging_exhausted_events"] = s.staging_exhausted_events;
  d["short_transfers"] = s.short_transfers;
  d["caller_submitted_ops"] = s.caller_submitted_ops;
  d["caller_queued_ops"] = s.caller_queued_ops;
  d["caller_inflight_max"] = s.caller_inflight_max;
  d["worker_adjustments"] = s.worker_adjustments;
  d["controller"] = s.controller;
  d["bytes_direct"] = s.bytes_direct;
  d["bytes_staged"] = s.bytes_staged;
  d["data_path"] = s.data_path;
  d["staging_mode"] = s.staging_mode;
  d["ordered_blocks"] = s.ordered_blocks;
  d["slot_blocks"] = s.slot_blocks;
  d["ordered_fallbacks"] = s.ordered_fallbacks;
  d["device_copies"] = s.device_copies;
  d["device_copy_bytes"] = s.device_copy_bytes;
  d["backend"] = s.backend;
  d["submit_seconds"] = s.submit_seconds;
  d["prepare_seconds"] = s.prepare_seconds;
  d["io_seconds"] = s.io_seconds;
  d["device_seconds"] = s.device_seconds;
  d["device_wait_seconds"] = s.device_wait_seconds;
  d["handle_seconds"] = s.handle_seconds;
  d["copy_seconds"] = s.copy_seconds;
  d["signal_seconds"] = s.signal_seconds;
  d["idle_spin_seconds"] = s.idle_spin_seconds;
  d["worker_passes"] = s.worker_passes;
  d["poll_waits"] = s.poll_waits;
  d["block_waits"] = s.block_waits;
  d["worker_sleeps"] = s.worker_sleeps;
  d["latency_mode"] = s.latency_mode;
  d["low_latency"] = s.low_latency;
  return d;
}

}  // namespace

GPUIO_BIND(engine, 10) {
  m.def("crc32c",
        [](nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> data, uint32_t crc) {
          nb::gil_scoped_release unlocked;
          return crc32c(data.data(), data.size(), crc);
        },
        nb::arg("data"), nb::arg("crc") = 0,
        "CRC-32C of a 1-D contiguous uint8 buffer, continuing crc (SSE4.2 where the CPU has it).");
  m.def("crc32c_hardware", &crc32c_hardware);
  m.def("engine_defaults", &engine_defaults, "Default of every gpuio.Engine keyword (from EngineOptions).");
  m.def("table_defaults", &table_defaults,
        "A table's engine policy on this machine (limits.hpp): workers (engine workers of a gpuio.TensorFile "
        "whose options name none) and request_blocks_max (blocks per engine request it issues).");
  m.def("auto_workers", &auto_workers, nb::arg("devices"),
        "workers=0: the worker threads an engine over `devices` devices starts here and its controller's first count.");
  m.def("engine_option_ranges", [] {
    nb::dict d;
    for (const OptionRange& r : engine_option_ranges()) d[r.name] = nb::make_tuple(r.min, r.max);
    return d;
  });
  m.def("check_engine_option",
        [](const std::string& name, nb::handle value) { check_option(name, bindings::int_value(name.c_str(), value)); },
        nb::arg("name"), nb::arg("value"),
        "ValueError/TypeError naming the option when value is outside its range (the engine's own check).");
  nb::class_<BatchHandle>(m, "BatchHandle")
      .def("done", &BatchHandle::done)
      .def("wait", &BatchHandle::wait, nb::arg("timeout_ms") = -1, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("seq", &BatchHandle::seq);
  m.def("wait_any", &wait_any, nb::arg("handles"), nb::arg("timeout_ms") = -1, nb::call_guard<nb::gil_scoped_release>());

  nb::class_<Holder>(m, "EngineCore")
      .def("__init__",
           [](Holder* self, std::vector<std::string> paths, nb::dict options) {
             EngineOptions o = engine_options(std::move(paths), options);
             std::unique_ptr<Engine> e;
             {
               nb::gil_scoped_release unlocked;
               e = Engine::create(o);
             }
             new (self) Holder{std::move(e)};
           },
           nb::arg("paths"), nb::arg("options"))
      // ids in host memory; data in host memory, or CUDA memory once a GPU runtime has installed the engine's
      // device mover (the engine-ceiling benchmark's GPU destination; gpuio.Engine sends CUDA memory through
      // GpuRuntime.stream_submit instead). The returned handle keeps the ids and the data alive until it is
      // dropped.
      .def("submit",
           [](Holder& h, int op, nb::handle blocks, nb::handle data) {
             bool read = op == 0;
             const char* name = read ? "out" : "src";
             bindings::Ids ids = bindings::ids_arg(blocks, "blocks", bindings::Mem::host);
             bindings::Data buf = bindings::data_arg(data, name, read, bindings::Mem::either);
             size_t n = ids.size();
             bindings::check_nbytes(buf, name, n * h->options().block_size, "len(blocks) * block_size");
             nb::gil_scoped_release unlocked;
             return h->submit(read ? IoOp::read : IoOp::write, ids.data(), n, buf.ptr,
                              buf.cuda() ? MemKind::device : MemKind::host);
           },
           nb::arg("op"), nb::arg("blocks"), nb::arg("data"), nb::keep_alive<0, 3>(), nb::keep_alive<0, 4>(),
           "Start op (0 read, 1 write) of blocks (int64, 1-D, contiguous, host memory) into/from data "
           "(contiguous, exactly len(blocks) * block_size bytes; read-only memory for writes); returns a "
           "BatchHandle. CUDA memory needs the engine's GPU runtime (its device mover).")
      .def("stats", [](const Holder& h) { return stats_dict(h->stats()); })
      .def("sync", [](Holder& h) { h->sync(); }, nb::call_guard<nb::gil_scoped_release>())
      .def("close", [](Holder& h) { h->close(); }, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("closed", [](const Holder& h) { return h->closed(); })
      .def_prop_ro("total_blocks", [](const Holder& h) { return h->total_blocks(); })
      .def_prop_ro("block_size", [](const Holder& h) { return h->options().block_size; })
      .def_prop_ro("devices",
                   [](const Holder& h) {
                     nb::list l;
                     for (size_t i = 0; i < h->device_count(); ++i) l.append(device_dict(h->device(i)));
                     return l;
                   })
      .def("open_target",
           [](Holder& h, std::vector<std::string> paths, nb::dict options) {
             TargetOptions t = target_options(std::move(paths), options);
             TargetInfo info;
             {
               nb::gil_scoped_release unlocked;
               info = h->open_target(t);
             }
             nb::dict d;
             d["id"] = info.id;
             d["base_block"] = info.base_block;
             d["blocks"] = info.blocks;
             nb::list devs;
             for (const DeviceInfo& x : info.devices) devs.append(device_dict(x));
             d["devices"] = devs;
             return d;
           },
           nb::arg("paths"), nb::arg("options"),
           "Open paths (one file, or a RAID-0 set) as a new target: a dict of id, base_block, blocks, devices.")
      .def("close_target", [](Holder& h, uint32_t id) { h->close_target(id); }, nb::arg("id"),
           nb::call_guard<nb::gil_scoped_release>())
      .def("sync_target", [](Holder& h, uint32_t id) { h->sync_target(id); }, nb::arg("id"),
           nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("target_count", [](const Holder& h) { return h->target_count(); })
      .def_static("create_file", &Engine::create_file, nb::arg("path"), nb::arg("nbytes"));
}
