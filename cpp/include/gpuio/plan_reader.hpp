// The plan reader: one data path that reads planned byte ranges of a file into destinations in host or CUDA memory
// (gpuio.safetensors' loader plans, this executes). Plain C++: no CUDA header needed to include it; the host part
// is built always, the CUDA copy stage only with the CUDA layer (GPUIO_HAVE_CUDA).
//
// A plan is a list of segments sorted by file offset: [file_offset, file_offset + len) lands at dst (host memory,
// or device memory of PlanOptions::device), and whether the bytes were resident in the page cache when planned.
// Segments need no alignment of any kind: the bytes go through a ring of `pieces` page-locked pieces of
// `piece_bytes` (a pooled block of the process's one pinned pool, gpuio/pinned_pool.hpp), so a destination's address
// need not be congruent to its file offset.
//   - bytes not resident: O_DIRECT reads of whole blocks, one piece each, `pieces` in flight on one io_uring queue
//     (the engine's uring backend, the ring registered as its fixed buffer), each piece copied to every segment it
//     overlaps as it lands; the file's partial last block by pread;
//   - resident bytes: preadv2(RWF_NOWAIT), into the destination itself on the host, into a piece for CUDA; what
//     did not come (evicted since the plan) is read by O_DIRECT as above;
//   - copies: memcpy on the host; on CUDA cudaMemcpyAsync on one of `streams` streams of the device (piece k on
//     stream k % streams), an event per piece before the piece is reused.
// Errors: the first failing read is thrown as IoError naming the file, the offset and errno, after every read in
// flight has been reaped and every copy has ended (nothing writes a destination after the call returns).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gpuio/pinned_pool.hpp"  // the pool the rings come from

namespace gpuio {

struct PlanSegment {
  uint64_t file_offset = 0;
  uint64_t len = 0;
  uint64_t dst = 0;       // address of the destination's first byte (host, or device memory of PlanOptions::device)
  uint32_t resident = 0;  // 1: in the page cache when planned
};

struct PlanOptions {
  int device = -1;                  // -1: destinations in host memory; else the CUDA device holding them
  uint32_t piece_bytes = 1u << 20;  // a multiple of 4096
  uint32_t pieces = 16;             // ring pieces: O_DIRECT reads in flight at most
  uint32_t streams = 4;             // CUDA copy streams (device >= 0)
  bool direct = true;               // O_DIRECT for bytes not resident (false, or refused by the file system: pread)
};

struct PlanStats {
  uint64_t bytes = 0;            // segment bytes delivered
  uint64_t pagecache_bytes = 0;  // of them copied out of the page cache (RWF_NOWAIT)
  uint64_t direct_bytes = 0;     // of them read by O_DIRECT
  uint64_t buffered_bytes = 0;   // of them read by plain pread (the partial last block, or no O_DIRECT)
  uint64_t disk_read_bytes = 0;  // bytes O_DIRECT read (whole blocks)
  uint64_t pieces = 0;           // pieces filled
  uint64_t copies = 0;           // piece -> segment copies
  uint32_t inflight_max = 0;     // most O_DIRECT reads in flight at once
  bool direct = false;           // O_DIRECT was used
  double seconds = 0;
};

// Reads the plan (segments[0..n), sorted by file_offset, not overlapping) of the file at path (size file_size).
// std::invalid_argument for a bad plan or options (named); IoError for a failed read.
PlanStats read_plan(const std::string& path, uint64_t file_size, const PlanSegment* segments, size_t n,
                    const PlanOptions& opts);

// A load's plans at once: each job one read_plan call (its own file, segments and options); `threads` threads take
// the jobs in order, each the next one not taken, so at most `threads` calls run at once and the caller holds no
// lock (nor, from Python, the GIL) while they do. Returns the jobs' stats summed (inflight_max: the most of one
// job; seconds: the whole run's) and, in *calls_max, the most jobs that ran at once. The first job to fail stops
// the taking of new ones; its error is thrown once every running job has ended.
struct PlanJob {
  std::string path;
  uint64_t file_size = 0;
  std::vector<PlanSegment> segments;
  PlanOptions opts;
};
PlanStats read_plans(const std::vector<PlanJob>& jobs, uint32_t threads, uint32_t* calls_max = nullptr);

}  // namespace gpuio
