// gpuio._core.Engine: the C++ engine behind gpuio.Engine (python/gpuio/engine.py). Buffers arrive as arrays
// (nb::ndarray, checked in bindings/arrays.hpp); options, their defaults and their checks live in C++. Waits
// and submissions release the GIL.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "bindings/arrays.hpp"
#include "bindings/engine_holder.hpp"
#include "bindings/knobs.hpp"
#include "bindings/options.hpp"
#include "bindings/registry.hpp"
#include "gpuio/crc32c.hpp"
#include "gpuio/engine.hpp"
#include "gpuio/gpu.hpp"

namespace nb = nanobind;
using namespace gpuio;

namespace {

// Owns the engine; the Python object's lifetime ends it (close() first stops the workers).
using Holder = bindings::EngineHolder;
using bindings::copy_dict;
using bindings::reject_unknown;
using bindings::knob_defaults;
using bindings::knob_rows;
using bindings::take_knobs;
using bindings::take_section;

// A section dict (sim=, fault=, rbd=) read through its knob table; leftover keys are typos.
template <class Options>
Options section_options(nb::dict d, const std::vector<Knob<Options>>& table, const char* what) {
  Options o;
  take_knobs(d, o, table);
  reject_unknown(d, what);
  return o;
}

// Options arrive as a dict of the keywords gpuio.Engine was given (the others keep the C++ defaults), read through
// the engine's knob table: integers are range-checked before narrowing, strings against their choices, relations
// by gpuio::validate in Engine::create, so the error text is C++'s whichever side set the value. Leftover keys are
// typos.
EngineOptions engine_options(std::vector<std::string> paths, nb::dict given) {
  nb::dict d = copy_dict(given);
  EngineOptions o;
  o.paths = std::move(paths);
  if (d.contains("workers") && d["workers"].is_none()) nb::del(d["workers"]);  // None: dynamic (0)
  take_knobs(d, o, engine_knobs());
  if (auto s = take_section(d, "sim")) o.backend.sim = section_options(*s, sim_knobs(), "sim");
  if (auto f = take_section(d, "fault")) {
    if (o.backend.kind.rfind("fault:", 0) != 0)
      throw std::invalid_argument("fault options given but backend='" + o.backend.kind + "'; use backend='fault:" +
                                  o.backend.kind + "'");
    o.backend.fault = section_options(*f, fault_knobs(), "fault");
  }
  if (auto r = take_section(d, "rbd")) o.backend.rbd = section_options(*r, rbd_knobs(), "rbd");
  reject_unknown(d, "engine");
  return o;
}

// The defaults of every gpuio.Engine keyword, read from a default-constructed EngineOptions through its table
// (KvikIO's way: Python restates none of them). sim, fault and rbd are sections, None unless given.
nb::dict engine_defaults() {
  nb::dict d = knob_defaults(engine_knobs());
  d["sim"] = nb::none();
  d["fault"] = nb::none();
  d["rbd"] = nb::none();
  return d;
}

// Every knob table by its name, for gpuio.defaults.
nb::dict knob_tables() {
  nb::dict d;
  d["engine"] = knob_rows(engine_knobs());
  d["gpu"] = knob_rows(gpu_knobs());
  d["sim"] = knob_rows(sim_knobs());
  d["fault"] = knob_rows(fault_knobs());
  d["rbd"] = knob_rows(rbd_knobs());
  return d;
}

// One value checked by its table's knob as an options dict would be (TypeError/ValueError naming the knob).
template <class Options>
void check_one(const std::vector<Knob<Options>>& table, const char* what, const std::string& name, nb::handle value) {
  find_knob(table, name, what);
  nb::dict d;
  d[name.c_str()] = value;
  Options o;
  take_knobs(d, o, table);
}

// The table layer's engine policy (limits.hpp), for this machine: gpuio.TensorFile reads it, restates none.
nb::dict table_defaults() {
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  nb::dict d;
  d["workers"] = limits::table_workers(online < 1 ? 1u : static_cast<uint32_t>(online));
  d["batch_blocks_max"] = limits::table_batch_blocks_max;
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
// stripe_bytes: the engine knobs marked per_target, read through the engine's table (defaults and ranges too).
TargetOptions target_options(std::vector<std::string> paths, nb::dict given) {
  nb::dict d = copy_dict(given);
  EngineOptions e;
  take_knobs(d, e, engine_knobs(), knob_per_target);
  reject_unknown(d, "target");
  TargetOptions t;
  t.paths = std::move(paths);
  t.stripe_bytes = e.stripe_bytes;
  t.open.direct = e.backend.direct;
  t.open.writable = e.backend.writable;
  t.open.lock = e.backend.lock;
  t.open.lock_wait_ms = e.backend.lock_wait_ms;
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
  d["inline_ops"] = s.inline_ops;
  d["inline_cached_ops"] = s.inline_cached_ops;
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
        "whose options name none) and batch_blocks_max (blocks per engine batch it submits).");
  m.def("auto_workers", &auto_workers, nb::arg("devices"),
        "workers=0: the worker threads an engine over `devices` devices starts here and its controller's first count.");
  m.def("knob_tables", &knob_tables,
        "Every knob table (engine, gpu, sim, fault, rbd): per knob name, default, type, min, max, choices, pow2, "
        "per_target, doc. gpuio.defaults is built from it.");
  m.def("check_knob",
        [](const std::string& table, const std::string& name, nb::handle value) {
          if (table == "engine") return check_one(engine_knobs(), "engine", name, value);
          if (table == "gpu") return check_one(gpu_knobs(), "GPU", name, value);
          if (table == "sim") return check_one(sim_knobs(), "sim", name, value);
          if (table == "fault") return check_one(fault_knobs(), "fault", name, value);
          if (table == "rbd") return check_one(rbd_knobs(), "rbd", name, value);
          throw std::invalid_argument("unknown knob table '" + table + "' (engine, gpu, sim, fault, rbd)");
        },
        nb::arg("table"), nb::arg("name"), nb::arg("value"),
        "TypeError/ValueError naming the knob when value is not one its table's check accepts.");
  m.def("check_engine_option",
        [](const std::string& name, nb::handle value) { check_option(name, bindings::int_value(name.c_str(), value)); },
        nb::arg("name"), nb::arg("value"),
        "ValueError/TypeError naming the option when value is outside its range (the engine's own check).");
  nb::class_<BatchHandle>(m, "BatchHandle")
      .def("done", &BatchHandle::done)
      .def("wait", &BatchHandle::wait, nb::arg("timeout_ms") = -1, nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("seq", &BatchHandle::seq)
      // gpuio.Future's Work protocol (python/gpuio/future.py): poll never raises; block takes seconds, None for
      // the engine's io_timeout_ms.
      .def("poll", &BatchHandle::done)
      .def(
          "block",
          [](const BatchHandle& h, std::optional<double> timeout_s) {
            int64_t ms = -1;  // the engine's io_timeout_ms
            // at most 1e9 s ("forever"): the deadline in nanoseconds must not overflow
            if (timeout_s) ms = static_cast<int64_t>(std::ceil(std::min(std::max(*timeout_s, 0.0), 1e9) * 1000.0));
            h.wait(ms);
          },
          nb::arg("timeout_s").none(), nb::call_guard<nb::gil_scoped_release>());
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
      // Synchronous read into host memory: Engine::read (a small contiguous run on this thread, else a batch and a
      // wait of the engine's io_timeout_ms), with the GIL released.
      .def("read",
           [](Holder& h, nb::handle blocks, nb::handle data) {
             bindings::Ids ids = bindings::ids_arg(blocks, "blocks", bindings::Mem::host);
             bindings::Data buf = bindings::data_arg(data, "out", true, bindings::Mem::host);
             size_t n = ids.size();
             bindings::check_nbytes(buf, "out", n * h->options().block_size, "len(blocks) * block_size");
             nb::gil_scoped_release unlocked;
             h->read(ids.data(), n, buf.ptr);
           },
           nb::arg("blocks"), nb::arg("out"),
           "Read blocks (int64, 1-D, contiguous, host memory) into out (host memory, exactly len(blocks) * "
           "block_size bytes) and wait. One contiguous run of at most inline_bytes_max bytes is read by the calling "
           "thread (stats: inline_ops).")
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
