// gpuio._core device-array bindings (python/gpuio/device_array.py is the Python face): HostArrayCache (the CPU
// implementation, always built) and GpuArrayCache (with the CUDA layer). They take the engine's owning object
// (gpuio._core.EngineCore, kept alive); indices and values arrive as arrays (nb::ndarray, bindings/arrays.hpp):
// int64 indices and len(idx) * elem_bytes bytes of values, host memory for the host cache, CUDA memory for the
// GPU one.
#include <nanobind/nanobind.h>
#include <nanobind/stl/vector.h>

#include <string>

#include "bindings/arrays.hpp"
#include "bindings/engine_holder.hpp"
#include "bindings/options.hpp"
#include "bindings/registry.hpp"
#include "gpuio/array_cache.hpp"

namespace nb = nanobind;

namespace {

using namespace gpuio;

CacheGeometry geometry(nb::dict given) {
  nb::dict d = bindings::copy_dict(given);
  CacheGeometry g;
  g.n_elems = bindings::take<uint64_t>(d, "n_elems", g.n_elems);
  g.elem_bytes = bindings::take<uint32_t>(d, "elem_bytes", g.elem_bytes);
  g.page_bytes = bindings::take<uint32_t>(d, "page_bytes", g.page_bytes);
  g.block_bytes = bindings::take<uint32_t>(d, "block_bytes", g.block_bytes);
  g.base_block = bindings::take<int64_t>(d, "base_block", g.base_block);
  g.sets = bindings::take<uint32_t>(d, "sets", g.sets);
  g.ways = bindings::take<uint32_t>(d, "ways", g.ways);
  g.round_pages = bindings::take<uint32_t>(d, "round_pages", g.round_pages);
  bindings::reject_unknown(d, "array geometry");
  return g;
}

// idx and data checked for a gather (out: writable) or a scatter (vals) of elem_bytes elements in `mem`.
struct Args {
  bindings::Ids idx;
  bindings::Data data;
};

Args args(nb::handle idx, nb::handle data, bool gather, uint32_t elem_bytes, bindings::Mem mem) {
  const char* name = gather ? "out" : "vals";
  Args a{bindings::ids_arg(idx, "idx", mem), bindings::data_arg(data, name, gather, mem)};
  bindings::check_nbytes(a.data, name, a.idx.size() * elem_bytes, "len(idx) * elem_bytes");
  return a;
}

nb::dict counters_dict(const ArrayCounters& c) {
  nb::dict d;
  d["hits"] = c.hits;
  d["misses"] = c.misses;
  d["page_reads"] = c.page_reads;
  d["page_writes"] = c.page_writes;
  d["evictions"] = c.evictions;
  d["requests"] = c.requests;
  return d;
}

}  // namespace

GPUIO_BIND(array, 30) {
  m.def("array_defaults",
        [] {
          nb::dict d;
          d["cache_bytes"] = array_defaults::cache_bytes;
          d["ways"] = array_defaults::ways;
          d["staging_groups"] = array_defaults::staging_groups;
          d["round_bytes"] = array_defaults::round_bytes;
          return d;
        },
        "DeviceArray's defaults (gpuio/array_cache.hpp, array_defaults), for gpuio.device_array.DEFAULTS.");
  nb::class_<HostArrayCache>(m, "HostArrayCache")
      .def("__init__",
           [](HostArrayCache* self, bindings::EngineHolder& engine, nb::dict g) {
             new (self) HostArrayCache(*engine, geometry(g));
           },
           nb::arg("engine"), nb::arg("geometry"), nb::keep_alive<1, 2>())
      .def("gather",
           [](HostArrayCache& c, nb::handle idx, nb::handle out) {
             Args a = args(idx, out, true, c.geometry().elem_bytes, bindings::Mem::host);
             nb::gil_scoped_release unlocked;
             c.gather(a.idx.data(), a.idx.size(), a.data.ptr);
           },
           nb::arg("idx"), nb::arg("out"))
      .def("scatter",
           [](HostArrayCache& c, nb::handle idx, nb::handle vals) {
             Args a = args(idx, vals, false, c.geometry().elem_bytes, bindings::Mem::host);
             nb::gil_scoped_release unlocked;
             c.scatter(a.idx.data(), a.idx.size(), a.data.ptr);
           },
           nb::arg("idx"), nb::arg("vals"))
      .def("flush", &HostArrayCache::flush, nb::call_guard<nb::gil_scoped_release>())
      .def("invalidate", &HostArrayCache::invalidate)
      .def("counters", [](const HostArrayCache& c) { return counters_dict(c.counters()); })
      .def("reset_counters", &HostArrayCache::reset_counters)
      .def("error", [](const HostArrayCache&) { return 0; })  // the host path raises at once instead
      .def("clear_error", [](HostArrayCache&) {})
      .def("tags", [](const HostArrayCache& c) { return c.tags(); });
#ifdef GPUIO_HAVE_CUDA
  nb::class_<GpuArrayCache>(m, "GpuArrayCache")
      .def("__init__",
           [](GpuArrayCache* self, bindings::EngineHolder& engine, std::vector<std::vector<uintptr_t>> queues,
              nb::dict g, uint32_t staging_groups) {
             CacheGeometry geo = geometry(g);
             std::vector<QueueRef> qs;
             for (const auto& q : queues) {  // (shared, tail, index) as gpuio.gpu.GpuRuntime.queue(i) gives them
               if (q.size() != 3) throw std::invalid_argument("a queue is (shared, tail, index), got " +
                                                              std::to_string(q.size()) + " values");
               QueueRef r;
               r.shared = reinterpret_cast<GpuQueueShared*>(q[0]);
               r.tail = reinterpret_cast<uint32_t*>(q[1]);
               r.index = static_cast<uint32_t>(q[2]);
               qs.push_back(r);
             }
             nb::gil_scoped_release unlocked;
             new (self) GpuArrayCache(*engine, qs, geo, staging_groups);
           },
           nb::arg("engine"), nb::arg("queues"), nb::arg("geometry"), nb::arg("staging_groups"), nb::keep_alive<1, 2>())
      // stream stays an address: a cudaStream_t (torch.cuda.Stream.cuda_stream). The kernels run later in stream
      // order: the caller (gpuio.DeviceArray) keeps idx and the data alive until the stream passed them.
      .def("gather",
           [](GpuArrayCache& c, nb::handle idx, nb::handle out, uintptr_t stream) {
             Args a = args(idx, out, true, c.ref().g.elem_bytes, bindings::Mem::cuda);
             c.gather(a.idx.data(), a.idx.size(), a.data.ptr, reinterpret_cast<void*>(stream));
           },
           nb::arg("idx"), nb::arg("out"), nb::arg("stream"))
      .def("scatter",
           [](GpuArrayCache& c, nb::handle idx, nb::handle vals, uintptr_t stream) {
             Args a = args(idx, vals, false, c.ref().g.elem_bytes, bindings::Mem::cuda);
             c.scatter(a.idx.data(), a.idx.size(), a.data.ptr, reinterpret_cast<void*>(stream));
           },
           nb::arg("idx"), nb::arg("vals"), nb::arg("stream"))
      .def("flush", &GpuArrayCache::flush, nb::call_guard<nb::gil_scoped_release>())
      .def("invalidate", &GpuArrayCache::invalidate, nb::call_guard<nb::gil_scoped_release>())
      .def("counters", [](const GpuArrayCache& c) { return counters_dict(c.counters()); })
      .def("reset_counters", &GpuArrayCache::reset_counters)
      .def("error", &GpuArrayCache::error)
      .def("clear_error", &GpuArrayCache::clear_error)
      .def("tags", &GpuArrayCache::tags)
      .def("ref_bytes", [](const GpuArrayCache& c) {
        const ArrayRef& r = c.ref();
        return nb::bytes(reinterpret_cast<const char*>(&r), sizeof(r));
      });
#endif
}
