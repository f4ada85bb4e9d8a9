// The raw-device reference ("what the device can do"): the algorithm of ../shared/tools/iobench.c. A tool of
// its own, not part of libgpuio: the library gpuio_raw, the command gpuio-raw (main.cpp) and the Python module
// gpuio_apps._raw (module.cpp), which `gpuio bench` runs in-process so gpuio and the device are measured side by side
// in one run (BENCHMARKS.md).
// Each thread opens the file itself (O_DIRECT by default) and either keeps an io_uring queue_depth deep
// or loops on pread/pwrite; offsets are random (per-thread xorshift64, seed 0x9E37..*(id+1)) or
// sequential from id * (blocks/threads), always block_bytes-aligned; all of them past skip_bytes.
#pragma once
#include <cstdint>
#include <string>

namespace gpuio::bench {

struct RawOptions {
  std::string path;
  uint32_t block_bytes = 4096;   // bytes per request
  uint32_t queue_depth = 32;     // uring: requests in flight per thread
  uint32_t threads = 1;
  double seconds = 1.0;          // run time; the loop stops issuing after it
  uint64_t ops_max = 0;          // > 0: stop after this many requests per thread (then time is ignored)
  bool uring = true;             // false: pread/pwrite (psync)
  bool sequential = false;
  bool write = false;
  bool direct = true;            // O_DIRECT
  uint64_t dest_bytes = 0;       // > 0: the memory the requests land in, rotated through (each request slot cycles
                                 // through its own lanes of it, so no two requests in flight share bytes), as a
                                 // program delivering that many bytes would; 0: queue_depth x block_bytes (iobench's)
  uint64_t skip_bytes = 0;       // requests stay clear of the file's first skip_bytes (rounded up to whole requests):
                                 // `gpuio bench` keeps its data file's marker there, so write passes leave it be
};

struct RawResult {
  uint64_t ops = 0;          // requests completed, all threads
  uint64_t bytes = 0;        // bytes moved, all threads
  double seconds = 0;        // wall time from the start gate (every thread set up) to the last one's end
  double cpu_seconds = 0;    // process CPU (user + system, getrusage delta) over the same span
};

// Throws gpuio::IoError (errno kept, path named) when the file cannot be opened or an I/O fails
// or comes back short; std::invalid_argument for bad options.
RawResult run_raw(const RawOptions& opts);

}  // namespace gpuio::bench
