// The nanobind bindings of the GPU layer's public header gpuio/gpu.hpp: this file implements no header of its own
// (gpu.hpp is implemented in cpp/src/gpu/; the name says which layer's bindings live here, one file per layer, as
// bindings/sim.cpp and engine.cpp). python/gpuio/gpu.py is the Python face. The runtime holds its engine's Python
// object (keep-alive); buffers arrive as arrays (nb::ndarray, host or CUDA memory, checked in bindings/arrays.hpp);
// waits release the GIL. Without the CUDA layer only gpu_defaults and gpu_probe_devices (which says why there is
// no GPU path) exist.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>

#include "bindings/arrays.hpp"
#include "bindings/engine_holder.hpp"
#include "bindings/knobs.hpp"
#include "bindings/options.hpp"
#include "bindings/registry.hpp"

#include "gpuio/gpu.hpp"  // plain C++: the GPU options' defaults are readable in a build without CUDA

namespace nb = nanobind;

#ifdef GPUIO_HAVE_CUDA
namespace {

using namespace gpuio;

using bindings::copy_dict;
using bindings::reject_unknown;

// The runtime with the engine it serves, whose block size the bindings check buffer sizes against.
struct Runtime : GpuRuntime {
  Runtime(Engine& e, const GpuOptions& o) : GpuRuntime(e, o), block_size(e.options().block_size) {}
  uint32_t block_size;
};

// One-block GPU-initiated reads of ids into dst (CUDA memory of 64 slots of 4 KiB, reused round-robin): each
// read's round trip in ns (GPU clock) and, with publish, the publish step's.
static std::vector<int64_t> probe(Runtime& r, uint32_t queue, const std::vector<int64_t>& ids, nb::handle dst,
                                  std::vector<int64_t>* publish, bool landed, std::vector<int64_t>* wait = nullptr) {
  if (r.block_size != 4096)
    throw std::invalid_argument("the latency probe reads 4096-byte blocks; this engine's block_size is " +
                                std::to_string(r.block_size));
  bindings::Data d = bindings::data_arg(dst, "dst", true, bindings::Mem::cuda);
  size_t want = std::min<size_t>(ids.size(), 64) * 4096;
  if (d.nbytes < want)
    throw std::invalid_argument("dst holds " + std::to_string(d.nbytes) + " bytes, expected at least " +
                                std::to_string(want) + " (min(len(ids), 64) slots of 4096)");
  std::vector<int64_t> ns;
  QueueRef q = r.queue(queue);
  nb::gil_scoped_release unlocked;
  gpu::latency_probe(q, ids.data(), static_cast<uint32_t>(ids.size()), d.ptr, ns, publish, landed, wait);
  return ns;
}

GpuOptions gpu_options(nb::dict given) {
  nb::dict d = copy_dict(given);
  GpuOptions o;
  bindings::take_knobs(d, o, gpu_knobs());
  reject_unknown(d, "GPU");
  return o;
}

nb::dict stats_dict(const GpuStats& s) {
  nb::dict d;
  d["copy_mode"] = s.copy_mode;
  d["copy_choice"] = s.copy_choice;
  d["stream_wait"] = s.stream_wait;
  d["stream_copy"] = s.stream_copy;
  d["gpu_device"] = s.device_name;
  d["gpu_requests"] = s.gpu_requests;
  d["gpu_failures"] = s.gpu_failures;
  d["device_read"] = s.device_read;
  d["device_read_mode"] = s.device_read_mode;
  d["gpu_landed_requests"] = s.landed_requests;
  d["gpu_device_requests"] = s.device_requests;
  d["gpu_api_requests"] = s.device_api_requests;
  d["gpu_api_submit_seconds"] = s.device_api_submit_seconds;
  d["gpu_api_engine_seconds"] = s.device_api_engine_seconds;
  d["gpu_api_signal_seconds"] = s.device_api_signal_seconds;
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
  m.def("gpu_defaults", [] { return gpuio::bindings::knob_defaults(gpuio::gpu_knobs()); },
        "Default of every GPU option (from GpuOptions, through its knob table), for gpuio.gpu.DEFAULTS.");
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
  m.def("gpu_mapped_view",
        [](nb::handle host, int device) {
          bindings::Data d = bindings::data_arg(host, "host", true, bindings::Mem::host);
          void* dev = gpu::host_device_pointer(d.ptr);
          // owner = host: the view keeps the pinned allocation alive
          return nb::ndarray<uint8_t, nb::ndim<1>, nb::device::cuda>(dev, {d.nbytes}, host, {}, nb::dtype<uint8_t>(),
                                                                      nb::device::cuda::value, device);
        },
        nb::arg("host"), nb::arg("device"),
        "A uint8 view (DLPack, CUDA device `device`) of pinned host memory `host`, for kernels on that device to "
        "read in place over PCIe; it keeps `host` alive. ValueError if host is not pinned.");
  m.def("gpu_stream_wait_selftest", &gpu::stream_wait_selftest, nb::arg("timeout_ms"),
        nb::call_guard<nb::gil_scoped_release>());
  m.def("gpu_pread_memcpy",
        [](const std::string& path, nb::handle ids, uint32_t block_bytes, nb::handle dst, uint32_t threads) {
          bindings::Ids i = bindings::ids_arg(ids, "ids", bindings::Mem::host);  // the baseline's threads read them
          bindings::Data d = bindings::data_arg(dst, "dst", true, bindings::Mem::cuda);
          bindings::check_nbytes(d, "dst", i.size() * block_bytes, "len(ids) * block_bytes");
          nb::gil_scoped_release unlocked;
          return gpu::pread_memcpy_baseline(path, i.data(), i.size(), block_bytes, d.ptr, threads);
        },
        nb::arg("path"), nb::arg("ids"), nb::arg("block_bytes"), nb::arg("dst"), nb::arg("threads"),
        "Seconds `threads` host threads take to pread each block of ids (int64, host) from path and "
        "cudaMemcpy it into dst (CUDA memory of len(ids) * block_bytes bytes): the naive baseline.");

  // A stream-ordered call's completion (gpuio.gpu.StreamHandle holds it): a pooled CUDA event recorded on the
  // caller's stream after the call. wait releases the GIL; order takes a cudaStream_t as an int (torch's
  // Stream.cuda_stream), like stream_submit.
  nb::class_<StreamDone>(m, "StreamDone")
      .def_prop_ro("before", &StreamDone::before, "the runtime's failures() before the call")
      .def("query", &StreamDone::query, "True once the stream has passed the call")
      .def("wait", &StreamDone::wait, nb::arg("timeout_s"), nb::call_guard<nb::gil_scoped_release>(),
           "Poll until the stream has passed the call, at most timeout_s seconds; False on timeout")
      .def("order", [](const StreamDone& d, uintptr_t stream) { d.order(reinterpret_cast<void*>(stream)); },
           nb::arg("stream"), "Make `stream` (a cudaStream_t) wait for the call");

  nb::class_<Runtime>(m, "GpuRuntime")
      .def("__init__",
           [](Runtime* self, bindings::EngineHolder& engine, nb::dict options) {
             GpuOptions o = gpu_options(options);
             nb::gil_scoped_release unlocked;
             new (self) Runtime(*engine, o);
           },
           nb::arg("engine"), nb::arg("options"), nb::keep_alive<1, 2>())  // the runtime keeps its engine alive
      // stream stays an address: it is a cudaStream_t that torch hands out as an int (torch.cuda.Stream.cuda_stream),
      // there is no array behind it. ids: int64 ids in host memory (handed to the engine now) or CUDA memory
      // (read when the stream reaches the request); data: host or CUDA memory of len(ids) * block_size bytes,
      // on the ids' GPU when both are CUDA memory (a DLPack capsule of either is taken as the array it holds:
      // gpuio.gpu passes torch.utils.dlpack.to_dlpack(t), microseconds cheaper than Tensor.__dlpack__). The
      // caller (gpuio.gpu.StreamHandle) keeps both alive until the stream has passed the request. GIL released
      // while a submit waits for bounce space, which frees as the streams move on. Returns the call's StreamDone.
      .def("stream_submit",
           [](Runtime& r, uintptr_t stream, int op, nb::handle ids, nb::handle data) {
             bool read = op == 0;
             const char* name = read ? "out" : "src";
             bindings::Ids i = bindings::ids_arg(ids, "blocks", bindings::Mem::either);
             bindings::Data d = bindings::data_arg(data, name, read, bindings::Mem::either);
             bindings::check_nbytes(d, name, i.size() * r.block_size, "len(blocks) * block_size");
             if (i.size() > UINT32_MAX)
               throw std::invalid_argument("a stream-ordered request of " + std::to_string(i.size()) +
                                           " blocks is too large (at most " + std::to_string(UINT32_MAX) + ")");
             if (i.cuda() && d.cuda() && i.array.device_id() != d.device_id)
               throw std::invalid_argument("blocks are on cuda:" + std::to_string(i.array.device_id()) +
                                           " but " + name + " is on cuda:" + std::to_string(d.device_id));
             std::unique_ptr<StreamDone> done;
             {
               nb::gil_scoped_release unlocked;
               r.stream_submit(reinterpret_cast<void*>(stream), read ? gpu_read : gpu_write, i.data(), i.cuda(),
                               static_cast<uint32_t>(i.size()), d.ptr, d.cuda() ? MemKind::device : MemKind::host,
                               &done);
             }
             return done;
           },
           nb::arg("stream"), nb::arg("op"), nb::arg("blocks"), nb::arg("data"))
      .def("failures", [](const Runtime& r) { return r.failures(); })
      .def("last_error", [](const Runtime& r) { return r.last_error(); })
      .def_prop_ro("queue_count", [](const Runtime& r) { return r.queue_count(); })
      // Addresses on purpose: the device-API queue (shared state, tail) is handed to CUDA kernels as a QueueRef
      // (gpuio.device_array's GpuArrayCache builds one from these); they are not arrays Python reads or writes.
      .def("queue_address",
           [](const Runtime& r, uint32_t i) {
             QueueRef q = r.queue(i);
             return std::vector<uintptr_t>{reinterpret_cast<uintptr_t>(q.shared), reinterpret_cast<uintptr_t>(q.tail),
                                           q.index};
           })
      // ids: a list (copied to the GPU by the probe); dst: CUDA memory of 64 slots of 4 KiB the reads land in.
      // landed: the reads land in host-mapped memory and the probing block copies them (prefetch_landed).
      .def("latency_probe_parts",  // (round trip ns, publish ns) per read
           [](Runtime& r, uint32_t queue, std::vector<int64_t> ids, nb::handle dst, bool landed) {
             std::vector<int64_t> pub;
             std::vector<int64_t> ns = probe(r, queue, ids, dst, &pub, landed);
             return std::make_pair(ns, pub);
           },
           nb::arg("queue"), nb::arg("ids"), nb::arg("dst"), nb::arg("landed") = false)
      .def("latency_probe",
           [](Runtime& r, uint32_t queue, std::vector<int64_t> ids, nb::handle dst, bool landed) {
             return probe(r, queue, ids, dst, nullptr, landed);
           },
           nb::arg("queue"), nb::arg("ids"), nb::arg("dst"), nb::arg("landed") = false)
      .def("latency_probe_hops",  // (round trip, publish, publish end -> done seen) ns per read, GPU clock
           [](Runtime& r, uint32_t queue, std::vector<int64_t> ids, nb::handle dst, bool landed) {
             std::vector<int64_t> pub, wait;
             std::vector<int64_t> ns = probe(r, queue, ids, dst, &pub, landed, &wait);
             return nb::make_tuple(ns, pub, wait);
           },
           nb::arg("queue"), nb::arg("ids"), nb::arg("dst"), nb::arg("landed") = false)
      // The control plane's hops of the last device-API requests, [(submit, engine, signal) ns], oldest first;
      // taking them empties the record.
      .def("take_device_api_trace", [](Runtime& r) { return r.take_device_api_trace(); })
      .def("stats", [](const Runtime& r) { return stats_dict(r.stats()); })
      .def("close", [](Runtime& r) { r.close(); }, nb::call_guard<nb::gil_scoped_release>());
#else
  m.def("gpu_probe_devices", [] {
    nb::dict d;
    d["count"] = 0;
    d["error"] = "gpuio was built without the CUDA layer (no nvcc found at build time; GPUIO_CUDA=ON forces it)";
    return d;
  });
#endif
}
