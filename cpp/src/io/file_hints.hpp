// What the kernel can tell or do for an open file without moving its data:
// - page_cache_residency: which byte ranges are in the page cache, the probe a loader asks before choosing, per
//   range, between a copy out of the page cache and an O_DIRECT read (DESIGN.md, "The page cache is a tier").
//   cachestat(2) where the kernel has it (Linux >= 6.5: one call per range, no mapping), else mincore(2) over
//   a read-only mapping of the range. Touches no data page.
// - reserve_space: fallocate(2) mode 0, so O_DIRECT writes land in reserved blocks instead of holes.
// Both thread-safe.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpuio::io {

struct Residency {
  std::vector<uint64_t> resident_bytes;  // per range: bytes whose pages are cached (a partly covered page counts whole)
  std::string method;                    // "cachestat" | "mincore"
};

// ranges: (offset, length) pairs in bytes; lengths past the end of the file count as not resident.
// Throws IoError (errno kept) when fd cannot be probed (not a file, mapping refused).
Residency page_cache_residency(int fd, const std::vector<std::pair<uint64_t, uint64_t>>& ranges);

// Reserve [offset, offset + length) of fd's file (unwritten extents; the file grows to cover it, blocks it has
// are kept). false where the file system cannot (EOPNOTSUPP: no emulation, which would write every block);
// throws IoError for any other failure (ENOSPC: the disk is full).
bool reserve_space(int fd, uint64_t offset, uint64_t length);

}  // namespace gpuio::io
