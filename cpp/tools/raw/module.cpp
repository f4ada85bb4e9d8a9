// gpuio_apps._raw: the raw-device reference (raw.hpp) as a Python module of its own, kept out of gpuio._core so the
// library carries no benchmark code. `gpuio bench` calls it in-process, interleaved with the engine's passes.
// Runs with the GIL released so Python threads (progress display) keep going.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "bindings/errors.hpp"
#include "raw.hpp"

namespace nb = nanobind;
using namespace nb::literals;

NB_MODULE(_raw, m) {
  gpuio::bindings::register_io_error_translator();  // OSError(errno, message), as gpuio._core
  m.def(
      "raw_bench",
      [](const std::string& path, uint32_t block_bytes, uint32_t queue_depth, uint32_t threads, double seconds,
         bool uring, bool sequential, bool write, bool direct, uint64_t ops_max, uint64_t skip_bytes,
         uint64_t dest_bytes) {
        gpuio::bench::RawOptions o;
        o.path = path;
        o.block_bytes = block_bytes;
        o.queue_depth = queue_depth;
        o.threads = threads;
        o.seconds = seconds;
        o.uring = uring;
        o.sequential = sequential;
        o.write = write;
        o.direct = direct;
        o.ops_max = ops_max;
        o.skip_bytes = skip_bytes;
        o.dest_bytes = dest_bytes;
        gpuio::bench::RawResult r;
        {
          nb::gil_scoped_release unlocked;
          r = gpuio::bench::run_raw(o);
        }
        nb::dict d;
        d["ops"] = r.ops;
        d["bytes"] = r.bytes;
        d["seconds"] = r.seconds;
        d["cpu_seconds"] = r.cpu_seconds;
        return d;
      },
      "path"_a, "block_bytes"_a = 4096, "queue_depth"_a = 32, "threads"_a = 1, "seconds"_a = 1.0, "uring"_a = true,
      "sequential"_a = false, "write"_a = false, "direct"_a = true, "ops_max"_a = 0,
      "skip_bytes"_a = 0, "dest_bytes"_a = 0,
      "Raw O_DIRECT reference (iobench algorithm); no request touches the file's first skip_bytes; dest_bytes > 0: the "
      "requests land in that much memory, rotated (0: queue_depth x block_bytes). Returns dict(ops, bytes, seconds, "
      "cpu_seconds).");
}
