// gpuio._core plan reader bindings (gpuio/plan_reader.hpp): read_plan executes a plan of segments, read_plans a
// load's plans on threads of its own, both with the GIL released (the rings' pool: bindings/pinned.cpp).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <vector>

#include "bindings/registry.hpp"
#include "gpuio/plan_reader.hpp"

namespace nb = nanobind;

namespace {

using Segments = nb::ndarray<const int64_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

std::vector<gpuio::PlanSegment> to_segments(const Segments& segments) {
  if (segments.shape(1) != 4) throw std::invalid_argument("segments must be an (n, 4) int64 array");
  std::vector<gpuio::PlanSegment> seg(segments.shape(0));
  const int64_t* p = segments.data();
  for (size_t i = 0; i < seg.size(); ++i) {
    seg[i].file_offset = static_cast<uint64_t>(p[4 * i]);
    seg[i].len = static_cast<uint64_t>(p[4 * i + 1]);
    seg[i].dst = static_cast<uint64_t>(p[4 * i + 2]);
    seg[i].resident = p[4 * i + 3] ? 1 : 0;
  }
  return seg;
}

gpuio::PlanOptions to_options(int device, uint32_t piece_bytes, uint32_t pieces, uint32_t streams, bool direct) {
  gpuio::PlanOptions o;
  o.device = device;
  o.piece_bytes = piece_bytes;
  o.pieces = pieces;
  o.streams = streams;
  o.direct = direct;
  return o;
}

nb::dict to_dict(const gpuio::PlanStats& s) {
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
}

// one job of read_plans: (path, file_size, segments, device, piece_bytes, pieces, streams, direct)
using Job = std::tuple<std::string, uint64_t, Segments, int, uint32_t, uint32_t, uint32_t, bool>;

}  // namespace

GPUIO_BIND(plan, 21) {
  m.def(
      "read_plan",
      [](const std::string& path, uint64_t file_size, Segments segments, int device, uint32_t piece_bytes,
         uint32_t pieces, uint32_t streams, bool direct) {
        std::vector<gpuio::PlanSegment> seg = to_segments(segments);
        gpuio::PlanOptions o = to_options(device, piece_bytes, pieces, streams, direct);
        gpuio::PlanStats s;
        {
          nb::gil_scoped_release nogil;
          s = gpuio::read_plan(path, file_size, seg.data(), seg.size(), o);
        }
        return to_dict(s);
      },
      nb::arg("path"), nb::arg("file_size"), nb::arg("segments"), nb::arg("device") = -1,
      nb::arg("piece_bytes") = 1u << 20, nb::arg("pieces") = 16, nb::arg("streams") = 4, nb::arg("direct") = true,
      "Read the plan (rows of file offset, length, destination address, resident) of the file at path into host "
      "memory (device=-1) or CUDA device memory; stats of what went where.");
  m.def(
      "read_plans",
      [](const std::vector<Job>& jobs, uint32_t threads) {
        std::vector<gpuio::PlanJob> js(jobs.size());
        for (size_t i = 0; i < jobs.size(); ++i) {
          const Job& j = jobs[i];
          js[i].path = std::get<0>(j);
          js[i].file_size = std::get<1>(j);
          js[i].segments = to_segments(std::get<2>(j));
          js[i].opts = to_options(std::get<3>(j), std::get<4>(j), std::get<5>(j), std::get<6>(j), std::get<7>(j));
        }
        gpuio::PlanStats s;
        uint32_t calls_max = 0;
        {
          nb::gil_scoped_release nogil;
          s = gpuio::read_plans(js, threads, &calls_max);
        }
        nb::dict d = to_dict(s);
        d["calls"] = jobs.size();
        d["calls_max"] = calls_max;
        return d;
      },
      nb::arg("jobs"), nb::arg("threads"),
      "A load's plans at once: jobs of (path, file_size, segments, device, piece_bytes, pieces, streams, direct), "
      "each one read_plan, `threads` of them running at once with the GIL released; their stats summed, calls "
      "and calls_max (the most at once). The first failure stops new jobs and is raised once the running ones end.");
}
