// gpuio._core.page_cache_residency and reserve_space: io/file_hints.hpp for the Python loaders and savers
// (gpuio.safetensors, the applications' stores). Both run with the GIL released.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings/registry.hpp"
#include "io/file_hints.hpp"

namespace nb = nanobind;
using namespace nb::literals;

GPUIO_BIND(file_hints, 55) {
  m.def(
      "page_cache_residency",
      [](int fd, const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
        gpuio::io::Residency r;
        {
          nb::gil_scoped_release unlocked;
          r = gpuio::io::page_cache_residency(fd, ranges);
        }
        return std::make_pair(r.resident_bytes, r.method);
      },
      "fd"_a, "ranges"_a,
      "Bytes of each (offset, length) range of the open regular file fd that are in the page cache, and the\n"
      "method used: (resident_bytes list, 'cachestat' | 'mincore'). Reads no data.");
  m.def(
      "reserve_space",
      [](int fd, uint64_t offset, uint64_t length) { return gpuio::io::reserve_space(fd, offset, length); },
      "fd"_a, "offset"_a, "length"_a, nb::call_guard<nb::gil_scoped_release>(),
      "Reserve [offset, offset + length) of the open file fd (fallocate mode 0). False where the file system\n"
      "cannot; OSError for any other failure.");
}
