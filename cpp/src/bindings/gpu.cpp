// gpuio._core GPU bindings (python/gpuio/gpu.py is the Python face). The runtime holds its engine's Python object
// (keep-alive); buffers arrive as addresses that gpuio._buffers validated; waits release the GIL. Without the
// CUDA layer only gpu_defaults and gpu_probe_devices (which says why there is no GPU path) exist.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include "bindings/engine_holder.hpp"
#include "bindings/options.hpp"
#include "bindings/registry.hpp"

#include "gpuio/gpu.hpp"  // plain C++: the GPU options' defaults are readable in a build without CUDA

namespace nb = nanobind;

#ifdef GPUIO_HAVE_CUDA
namespace {

using namespace gpuio;

using bindings::copy_dict;
using bindings::reject_unknown;
using bindings::take;

GpuOptions gpu_options(nb::dict given) {
  nb::dict d = copy_dict(given);
  GpuOptions o;
  o.queues = take<uint32_t>(d, "queues", o.queues);
  o.copy = take<std::string>(d, "copy", o.copy);
  o.stream_wait = take<std::string>(d, "stream_wait", o.stream_wait);
  o.device = take<int>(d, "device", o.device);
  o.poll_spin_us = take<uint32_t>(d, "poll_spin_us", o.poll_spin_us);
  o.bounce_bytes = take<uint64_t>(d, "bounce_bytes", o.bounce_bytes);
  o.bounce_wait_ms = take<uint32_t>(d, "bounce_wait_ms", o.bounce_wait_ms);
  reject_unknown(d, "GPU");
  return o;
}

nb::dict stats_dict(const GpuStats& s) {
  nb::dict d;
  d["copy_mode"] = s.copy_mode;
  d["copy_choice"] = s.copy_choice;
  d["stream_wait"] = s.stream_wait;
  d["gpu_device"] = s.device_name;
  d["gpu_requests"] = s.gpu_requests;
  d["gpu_failures"] = s.gpu_failures;
  d["gpu_copies"] = s.copies;
  d["gpu_copy_groups"] = s.copy_groups;
  d["gpu_stage_in_copies"] = s.stage_in_copies;
  d["poller_cpu_seconds"] = s.poller_cpu_seconds;
  d["gpu_stream_requests"] = s.stream_requests;
  d["gpu_stream_chunks"] = s.stream_chunks;
  d["gpu_stream_host_submits"] = s.stream_host_submits;
  d["gpu_bounce_bytes"] = s.bounce_bytes;
  d["gpu_bounce_waits"] = s.bounce_waits;
  d["gpu_stream_call_seconds"] = s.stream_call_seconds;
  d["gpu_stream_check_seconds"] = s.stream_check_seconds;
  d["gpu_stream_engine_seconds"] = s.stream_engine_seconds;
  d["gpu_stream_wait_seconds"] = s.stream_wait_seconds;
  d["gpu_stream_copy_seconds"] = s.stream_copy_seconds;
  d["gpu_stream_release_seconds"] = s.stream_release_seconds;
  d["gpu_last_error"] = s.last_error;
  return d;
}

}  // namespace
#endif

GPUIO_BIND(gpu, 20) {
  m.def("gpu_defaults",
        [] {
          gpuio::GpuOptions o;
          nb::dict d;
          d["queues"] = o.queues;
          d["copy"] = o.copy;
          d["stream_wait"] = o.stream_wait;
          d["device"] = o.device;
          d["poll_spin_us"] = o.poll_spin_us;
          d["bounce_bytes"] = o.bounce_bytes;
          d["bounce_wait_ms"] = o.bounce_wait_ms;
          return d;
        },
        "Default of every GPU option (from GpuOptions), for gpuio.gpu.DEFAULTS.");
#ifdef GPUIO_HAVE_CUDA
  m.def("gpu_probe_devices", [] {
    gpu::DeviceReport r = gpu::probe_devices();
    nb::dict d;
    d["count"] = r.count;
    d["name"] = r.name;
    d["error"] = r.error;
    d["driver_version"] = r.driver_version;
    d["runtime_version"] = r.runtime_version;
    d["sm_count"] = r.sm_count;
    return d;
  });
  m.def("gpu_stream_wait_selftest", &gpu::stream_wait_selftest, nb::arg("timeout_ms"),
        nb::call_guard<nb::gil_scoped_release>());
  m.def("gpu_pread_memcpy",
        [](const std::string& path, uintptr_t ids, size_t n, uint32_t block_bytes, uintptr_t dst, uint32_t threads) {
          return gpu::pread_memcpy_baseline(path, reinterpret_cast<const int64_t*>(ids), n, block_bytes,
                                            reinterpret_cast<void*>(dst), threads);
        },
        nb::arg("path"), nb::arg("ids_ptr"), nb::arg("n"), nb::arg("block_bytes"), nb::arg("dst_ptr"),
        nb::arg("threads"), nb::call_guard<nb::gil_scoped_release>());

  nb::class_<GpuRuntime>(m, "GpuRuntime")
      .def("__init__",
           [](GpuRuntime* self, bindings::EngineHolder& engine, nb::dict options) {
             GpuOptions o = gpu_options(options);
             nb::gil_scoped_release unlocked;
             new (self) GpuRuntime(*engine, o);
           },
           nb::arg("engine"), nb::arg("options"), nb::keep_alive<1, 2>())  // the runtime keeps its engine alive
      // GIL released: a submit may wait for bounce space, which frees as the streams move on.
      .def("stream_submit",
           [](GpuRuntime& r, uintptr_t stream, int op, uintptr_t ids, bool ids_on_device, uint32_t n, uintptr_t mem,
              int kind) {
             return r.stream_submit(reinterpret_cast<void*>(stream), op == 0 ? gpu_read : gpu_write,
                                    reinterpret_cast<const int64_t*>(ids), ids_on_device, n,
                                    reinterpret_cast<void*>(mem), kind == 0 ? MemKind::host : MemKind::device);
           },
           nb::arg("stream"), nb::arg("op"), nb::arg("ids_ptr"), nb::arg("ids_on_device"), nb::arg("n"),
           nb::arg("mem_ptr"), nb::arg("mem_kind"), nb::call_guard<nb::gil_scoped_release>())
      .def("failures", &GpuRuntime::failures)
      .def("last_error", &GpuRuntime::last_error)
      .def_prop_ro("queue_count", &GpuRuntime::queue_count)
      .def("queue_address",
           [](const GpuRuntime& r, uint32_t i) {
             QueueRef q = r.queue(i);
             return std::vector<uintptr_t>{reinterpret_cast<uintptr_t>(q.shared), reinterpret_cast<uintptr_t>(q.tail),
                                           q.index};
           })
      .def("alloc", [](GpuRuntime& r, size_t bytes) { return reinterpret_cast<uintptr_t>(r.alloc(bytes)); })
      .def("free", [](GpuRuntime& r, uintptr_t p) { r.free(reinterpret_cast<void*>(p)); })
      .def("latency_probe_parts",  // (round trip ns, publish ns) per read
           [](GpuRuntime& r, uint32_t queue, std::vector<int64_t> ids, uintptr_t dst) {
             std::vector<int64_t> ns, pub;
             QueueRef q = r.queue(queue);
             {
               nb::gil_scoped_release unlocked;
               gpu::latency_probe(q, ids.data(), static_cast<uint32_t>(ids.size()), reinterpret_cast<void*>(dst), ns,
                                  &pub);
             }
             return std::make_pair(ns, pub);
           })
      .def("latency_probe",
           [](GpuRuntime& r, uint32_t queue, std::vector<int64_t> ids, uintptr_t dst) {
             std::vector<int64_t> ns;
             QueueRef q = r.queue(queue);
             nb::gil_scoped_release unlocked;
             gpu::latency_probe(q, ids.data(), static_cast<uint32_t>(ids.size()), reinterpret_cast<void*>(dst), ns);
             return ns;
           })
      .def("stats", [](const GpuRuntime& r) { return stats_dict(r.stats()); })
      .def("close", &GpuRuntime::close, nb::call_guard<nb::gil_scoped_release>());
#else
  m.def("gpu_probe_devices", [] {
    nb::dict d;
    d["count"] = 0;
    d["error"] = "gpuio was built without the CUDA layer (no nvcc found at build time; GPUIO_CUDA=ON forces it)";
    return d;
  });
#endif
}
