// The nanobind bindings of the flash simulator's public headers gpuio/sim.hpp and gpuio/zng.hpp (DESIGN.md layer 0):
// this file implements neither (cpp/src/sim/ does); the name says which layer's bindings live here, one file per
// layer. Results cross as JSON text (Stats::to_json,
// ZngResult::to_json), which gpuio.sim turns into dicts; traces stay in C++ behind opaque handles so a
// replay never copies requests through Python. The GIL is released while a model runs.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>

#include "bindings/registry.hpp"
#include "gpuio/sim.hpp"
#include "gpuio/zng.hpp"

namespace nb = nanobind;
namespace gs = gpuio::sim;
namespace gz = gpuio::zng;

namespace {

struct BlockTrace {
  std::vector<gs::Request> reqs;
  std::string source;
};
struct GpuTrace {
  std::vector<gz::Access> accesses;
  std::string source;
};

BlockTrace load_block_trace(const std::string& path, const std::string& format) {
  std::string f = format == "auto" ? gs::detect_trace_format(path) : format;
  if (f == "disksim") return {gs::parse_disksim(path, "auto"), path};
  if (f == "disksim-ms") return {gs::parse_disksim(path, "ms"), path};
  if (f == "disksim-ns") return {gs::parse_disksim(path, "ns"), path};
  if (f == "blkparse") return {gs::parse_blkparse(path), path};
  throw std::invalid_argument("unknown trace format '" + format +
                              "': expected auto, disksim, disksim-ms, disksim-ns or blkparse");
}

gs::SsdConfig ssd_config(const std::string& preset, uint32_t queue_depth, uint32_t host_queues, double prefill,
                         int64_t write_buffer_pages, uint32_t channels, uint32_t blocks_per_plane, uint64_t seed) {
  gs::SsdConfig c = gs::preset(preset);
  if (queue_depth) c.queue_depth = queue_depth;
  if (host_queues) c.host_queues = host_queues;
  c.prefill = prefill;
  if (write_buffer_pages >= 0) c.write_buffer_pages = static_cast<uint32_t>(write_buffer_pages);
  if (channels) c.geometry.channels = channels;
  if (blocks_per_plane) c.geometry.blocks_per_plane = blocks_per_plane;
  c.seed = seed;
  gs::validate(c);
  return c;
}

// Replays the trace `repeat` times back to back (each pass shifted past the previous one) through one SSD.
// Returns (stats JSON, seconds the model took on this thread, excluding parsing).
std::pair<std::string, double> replay(const BlockTrace& t, const gs::SsdConfig& c, uint32_t repeat) {
  if (repeat == 0) throw std::invalid_argument("repeat must be >= 1");
  gs::Ssd ssd(c);
  auto t0 = std::chrono::steady_clock::now();
  uint64_t shift = 0, end = 0;
  uint64_t span = t.reqs.empty() ? 0 : t.reqs.back().arrival_ns - t.reqs.front().arrival_ns + 1;
  for (uint32_t r = 0; r < repeat; ++r, shift += span)
    for (gs::Request q : t.reqs) {
      q.arrival_ns += shift;
      end = std::max(end, ssd.submit(q));
    }
  ssd.flush(end);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {ssd.stats().to_json(), secs};
}

}  // namespace

GPUIO_BIND(sim, 80) {
  nb::class_<BlockTrace>(m, "SimBlockTrace", "Block requests held in C++ (from a trace file or synthesized).")
      .def("__len__", [](const BlockTrace& t) { return t.reqs.size(); })
      .def_ro("source", &BlockTrace::source)
      .def("reads", [](const BlockTrace& t) {
        size_t n = 0;
        for (auto& r : t.reqs) n += !r.write;
        return n;
      });
  nb::class_<GpuTrace>(m, "ZngTrace", "GPU memory accesses held in C++.")
      .def("__len__", [](const GpuTrace& t) { return t.accesses.size(); })
      .def_ro("source", &GpuTrace::source)
      .def("save", [](const GpuTrace& t, const std::string& path) { gz::write_trace(path, t.accesses); });

  m.def("sim_presets", &gs::preset_names);
  m.def("sim_limits", [] {
    nb::dict d;
    d["workload_requests_max"] = gs::workload_requests_max;
    d["request_bytes"] = sizeof(gs::Request);
    return d;
  }, "The simulator's named limits: workload_requests_max (requests of one synthetic workload, whose trace is "
     "built in memory, request_bytes each).");
  m.def("sim_load_trace", &load_block_trace, nb::arg("path"), nb::arg("format") = "auto",
        nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "sim_synthesize",
      [](const std::string& preset, uint64_t requests, uint32_t request_bytes, double read_ratio, bool sequential,
         uint64_t span_bytes, uint32_t queues, uint64_t seed) {
        gs::SsdConfig c = gs::preset(preset);
        gs::Workload w;
        w.requests = requests, w.request_bytes = request_bytes, w.read_ratio = read_ratio;
        w.sequential = sequential, w.span_bytes = span_bytes, w.queues = queues, w.seed = seed;
        uint64_t logical = static_cast<uint64_t>(static_cast<double>(c.geometry.pages()) * (1.0 - c.overprovision)) *
                           c.geometry.page_bytes;
        return BlockTrace{gs::synthesize(w, logical), "synthetic"};
      },
      nb::arg("preset"), nb::arg("requests"), nb::arg("request_bytes"), nb::arg("read_ratio"), nb::arg("sequential"),
      nb::arg("span_bytes"), nb::arg("queues"), nb::arg("seed"));
  m.def(
      "sim_replay",
      [](const BlockTrace& t, const std::string& preset, uint32_t queue_depth, uint32_t host_queues, double prefill,
         int64_t write_buffer_pages, uint32_t channels, uint32_t blocks_per_plane, uint64_t seed, uint32_t repeat) {
        gs::SsdConfig c =
            ssd_config(preset, queue_depth, host_queues, prefill, write_buffer_pages, channels, blocks_per_plane, seed);
        nb::gil_scoped_release nogil;
        return replay(t, c, repeat);
      },
      nb::arg("trace"), nb::arg("preset"), nb::arg("queue_depth") = 0, nb::arg("host_queues") = 0,
      nb::arg("prefill") = 0.0, nb::arg("write_buffer_pages") = -1, nb::arg("channels") = 0,
      nb::arg("blocks_per_plane") = 0, nb::arg("seed") = 1, nb::arg("repeat") = 1);

  m.def("zng_platforms", &gz::platform_names);
  m.def("zng_workloads", &gz::workload_names);
  m.def(
      "zng_generate",
      [](const std::string& w, double scale, uint64_t seed) { return GpuTrace{gz::generate(w, scale, seed), w}; },
      nb::arg("workload"), nb::arg("scale") = 1.0, nb::arg("seed") = 1, nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "zng_load_trace", [](const std::string& path) { return GpuTrace{gz::parse_trace(path), path}; },
      nb::arg("path"), nb::call_guard<nb::gil_scoped_release>());
  m.def(
      "zng_run",
      [](const GpuTrace& t, const std::string& platform, int grouped_registers, uint32_t registers_per_plane,
         uint32_t l2_bytes) {
        gz::ZngConfig c = gz::platform_config(gz::parse_platform(platform));
        if (grouped_registers >= 0) c.grouped_registers = grouped_registers != 0;
        if (registers_per_plane) c.registers_per_plane = registers_per_plane;
        if (l2_bytes) c.l2_bytes = l2_bytes;
        nb::gil_scoped_release nogil;
        return gz::run(c, t.accesses).to_json();
      },
      nb::arg("trace"), nb::arg("platform"), nb::arg("grouped_registers") = -1, nb::arg("registers_per_plane") = 0,
      nb::arg("l2_bytes") = 0);
}
