// gpuio._core plan reader bindings (gpuio/plan_reader.hpp): read_plan executes a plan of segments with the GIL
// released (its ring's pool: bindings/pinned.cpp).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <vector>

#include "bindings/registry.hpp"
#include "gpuio/plan_reader.hpp"

namespace nb = nanobind;

GPUIO_BIND(plan, 21) {
  m.def(
      "read_plan",
      [](const std::string& path, uint64_t file_size,
         nb::ndarray<const int64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> segments, int device,
         uint32_t piece_bytes, uint32_t pieces, uint32_t streams, bool direct) {
        if (segments.shape(1) != 4) throw std::invalid_argument("segments must be an (n, 4) int64 array");
        std::vector<gpuio::PlanSegment> seg(segments.shape(0));
        const int64_t* p = segments.data();
        for (size_t i = 0; i < seg.size(); ++i) {
          seg[i].file_offset = static_cast<uint64_t>(p[4 * i]);
          seg[i].len = static_cast<uint64_t>(p[4 * i + 1]);
          seg[i].dst = static_cast<uint64_t>(p[4 * i + 2]);
          seg[i].resident = p[4 * i + 3] ? 1 : 0;
        }
        gpuio::PlanOptions o;
        o.device = device;
        o.piece_bytes = piece_bytes;
        o.pieces = pieces;
        o.streams = streams;
        o.direct = direct;
        gpuio::PlanStats s;
        {
          nb::gil_scoped_release nogil;
          s = gpuio::read_plan(path, file_size, seg.data(), seg.size(), o);
        }
        nb::dict d;
        d["bytes"] = s.bytes;
        d["pagecache_bytes"] = s.pagecache_bytes;
        d["direct_bytes"] = s.direct_bytes;
        d["buffered_bytes"] = s.buffered_bytes;
        d["disk_read_bytes"] = s.disk_read_bytes;
        d["pieces"] = s.pieces;
        d["copies"] = s.copies;
        d["inflight_max"] = s.inflight_max;
        d["direct"] = s.direct;
        d["seconds"] = s.seconds;
        return d;
      },
      nb::arg("path"), nb::arg("file_size"), nb::arg("segments"), nb::arg("device") = -1,
      nb::arg("piece_bytes") = 1u << 20, nb::arg("pieces") = 16, nb::arg("streams") = 4, nb::arg("direct") = true,
      "Read the plan (rows of file offset, length, destination address, resident) of the file at path into host "
      "memory (device=-1) or CUDA device memory; stats of what went where.");
}
