// ZnG models (DESIGN.md layer 0): a GPU whose memory is flash, driven by GPU memory-access traces.
//
// Trace-driven and deterministic. Each warp replays its accesses in order; a load blocks its warp until it
// completes, stores do not (they occupy the memory system when L2 writes them back). Warps interleave by a
// time-ordered heap. L2 is set-associative LRU with 128 B lines. Behind L2 each platform has its memory:
//   hetero     GPU DRAM (page cache of the data set) + an NVMe SSD reached through the host (PCIe + stack)
//   hybridgpu  GPU DRAM (page cache) + flash inside the GPU behind an SSD controller (firmware FTL cores)
//   zng-base   Z-NAND replaces DRAM: zero-overhead FTL (read-only block map looked up with the address
//              translation + per-log-block page map, GC by a helper), shared channel buses, no write buffer
//              (a dirty line costs a read-modify-write page program)
//   zng-rdopt  base + L2 as read buffer: PC-indexed predictor and access monitor drive prefetch; flash
//              network (a link per plane instead of a bus per channel)
//   zng-wropt  base + flash registers as write buffer grouped across the planes of a die (NiF), with the
//              thrashing check that pins L2 space for re-written lines
//   zng        rdopt + wropt
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpuio::zng {

struct Access {
  uint64_t cycle = 0;  // GPU cycle the warp would issue it at with an ideal memory
  uint32_t warp = 0;
  uint32_t pc = 0;
  uint64_t addr = 0;
  uint32_t bytes = 0;
  bool write = false;
};

// Text: one access per line, "cycle warp pc address size r|w" (numbers decimal or 0x-hex). '#' comments.
// Throws std::invalid_argument naming the file, line number and bad field.
std::vector<Access> parse_trace(const std::string& path);
void write_trace(const std::string& path, const std::vector<Access>& trace);

// Generators. Sizes are element counts; warps share work round-robin; 32 lanes per warp; coalesced
// accesses become one 128 B request per warp instruction, gathers one request per lane.
std::vector<Access> gen_bfs(uint32_t vertices, uint32_t avg_degree, uint32_t warps, uint64_t seed);
std::vector<Access> gen_pagerank(uint32_t vertices, uint32_t avg_degree, uint32_t iterations, uint32_t warps,
                                 uint64_t seed);
std::vector<Access> gen_gemm(uint32_t n, uint32_t tile, uint32_t warps);          // C = A x B, tiled
std::vector<Access> gen_stencil(uint32_t n, uint32_t iterations, uint32_t warps);  // 2-D 5-point
std::vector<Access> gen_vecadd(uint64_t n, uint32_t warps);                        // c = a + b
// "bfs", "pagerank", "gemm", "stencil", "vecadd" at a scale (1 = the report's default size).
std::vector<Access> generate(const std::string& workload, double scale, uint64_t seed);
std::vector<std::string> workload_names();

// PC-indexed prefetch predictor: 512 entries of 4-bit saturating counters; predicts "prefetch" above 12.
// The counter of a PC tracks the spatial locality of that instruction's loads, trained two ways:
//  - observe(): each L2 miss of the PC counts up when it lies within reach_bytes (the prefetch window plus
//    one flash page) of one of the last 16 misses of that entry, down otherwise (warps running the same
//    instruction interleave, so a single "last address" would call a streaming PC irregular);
//  - feedback(): each line the PC prefetched counts up when a later access uses it, down when L2 evicts it
//    unused. Once a streaming PC prefetches, most of its loads hit and its few remaining misses (one per
//    window, from whichever warp gets there first) say little; whether its prefetches were used says it all.
// Two scores: decision accuracy (observe's prediction vs what the miss turned out to be) and prefetch
// accuracy (lines used / lines prefetched and resolved, the usual prefetcher accuracy).
class Predictor {
 public:
  static constexpr uint32_t kEntries = 512;
  static constexpr uint8_t kMax = 15, kThreshold = 12;
  bool predict(uint32_t pc) const { return counter_[pc % kEntries] > kThreshold; }
  // Scores the prediction against what the access turned out to be, then trains. Returns the prediction.
  bool observe(uint32_t pc, uint64_t addr, uint64_t reach_bytes);
  // A line prefetched for pc was used (true) or evicted unused (false).
  void feedback(uint32_t pc, bool used);
  uint8_t counter(uint32_t pc) const { return counter_[pc % kEntries]; }
  uint64_t decisions() const { return decisions_; }
  uint64_t correct() const { return correct_; }
  double accuracy() const { return decisions_ ? static_cast<double>(correct_) / decisions_ : 0.0; }
  uint64_t prefetch_used() const { return used_; }
  uint64_t prefetch_unused() const { return unused_; }
  double prefetch_accuracy() const { return used_ + unused_ ? static_cast<double>(used_) / (used_ + unused_) : 0.0; }

 private:
  uint8_t counter_[kEntries] = {};
  static constexpr uint32_t kHistory = 16;
  uint64_t last_addr_[kEntries][kHistory] = {};
  uint8_t seen_[kEntries] = {};  // history entries filled (<= kHistory)
  uint8_t head_[kEntries] = {};
  uint64_t decisions_ = 0, correct_ = 0, used_ = 0, unused_ = 0;
};

// Access monitor: over each epoch of prefetched lines, waste = lines evicted from L2 unused / lines
// prefetched. waste > 0.3 halves the prefetch size; waste < 0.05 grows it by 1 KiB.
class AccessMonitor {
 public:
  AccessMonitor(uint32_t initial_bytes, uint32_t min_bytes, uint32_t max_bytes, uint32_t epoch_lines);
  uint32_t prefetch_bytes() const { return bytes_; }
  void prefetched(uint32_t lines);  // may end the epoch
  void wasted(uint32_t lines) { wasted_ += lines; }
  uint64_t halvings() const { return halvings_; }
  uint64_t growths() const { return growths_; }

 private:
  void end_epoch();
  uint32_t bytes_, min_, max_, epoch_;
  uint64_t prefetched_ = 0, wasted_ = 0, halvings_ = 0, growths_ = 0;
};

enum class Platform { hetero, hybridgpu, zng_base, zng_rdopt, zng_wropt, zng };
std::vector<std::string> platform_names();          // in the enum's order
Platform parse_platform(const std::string& name);   // throws std::invalid_argument naming it
std::string platform_name(Platform p);

struct ZngConfig {
  Platform platform = Platform::zng;
  double gpu_ghz = 1.4;
  uint32_t l2_bytes = 2u << 20, l2_ways = 16, l2_line_bytes = 128, l2_hit_ns = 150;
  // flash
  uint32_t channels = 16, dies_per_channel = 4, planes_per_die = 4;
  uint32_t page_bytes = 4096, pages_per_block = 64;
  uint32_t read_ns = 3000, program_ns = 100000, erase_ns = 1000000;
  uint32_t link_mb_s = 800;           // channel bus (or, with the flash network, each plane's link)
  uint32_t flash_cmd_ns = 100;        // command/address cycles per flash transfer
  uint32_t log_blocks_per_plane = 4;  // zero-overhead FTL: page-mapped log blocks; a full log is merged by GC
  // features (set by platform_config)
  bool read_prefetch = false, flash_network = false, register_write_buffer = false, grouped_registers = false;
  bool pin_on_thrash = false;
  uint32_t registers_per_plane = 2;
  uint32_t prefetch_bytes_initial = 4096, prefetch_bytes_min = 256, prefetch_bytes_max = 16384;
  uint32_t monitor_epoch_lines = 4096;
  double thrash_pin_above = 0.2;      // register allocations that hit a recently evicted page, per epoch
  uint32_t pin_lines_max = 2048;      // L2 lines that may be pinned
  // DRAM platforms (hetero, hybridgpu)
  uint32_t dram_bytes = 8u << 20, dram_ns = 300, dram_mb_s = 200000;
  uint32_t firmware_ns = 2000, firmware_cores = 4;  // hybridgpu: FTL on the SSD controller's cores
  uint32_t host_ns = 20000, pcie_mb_s = 16000;      // hetero: host stack per miss + PCIe
};
ZngConfig platform_config(Platform p);

struct ZngResult {
  std::string platform;
  uint64_t accesses = 0, read_accesses = 0, write_accesses = 0, gpu_bytes = 0;
  uint64_t runtime_ns = 0;
  double bandwidth_gb_s = 0;          // gpu_bytes / runtime: memory bandwidth delivered to the GPU
  double flash_bandwidth_gb_s = 0;    // bytes moved between flash arrays and the GPU side / runtime
  uint64_t l2_hits = 0, l2_misses = 0;
  uint64_t flash_reads = 0, register_read_hits = 0, flash_read_bytes = 0;
  uint64_t flash_programs = 0, written_back_bytes = 0;  // pages programmed; dirty bytes L2 handed down
  double write_redundancy = 0;        // programmed bytes / written-back bytes
  uint64_t register_write_hits = 0, register_evictions = 0, thrash_events = 0, pinned_lines_peak = 0;
  uint64_t gc_runs = 0, gc_pages_moved = 0;
  uint64_t prefetches = 0, prefetched_lines = 0, prefetch_used_lines = 0, prefetch_wasted_lines = 0;
  double predictor_accuracy = 0;      // prefetch accuracy: prefetched lines used / prefetched lines
  double predictor_decision_accuracy = 0;  // miss classifications (regular or not) the counter got right
  uint64_t monitor_halvings = 0, monitor_growths = 0;
  uint32_t prefetch_bytes_final = 0;
  uint64_t dram_hits = 0, dram_misses = 0;
  std::string to_json() const;
};

ZngResult run(const ZngConfig& cfg, const std::vector<Access>& trace);

}  // namespace gpuio::zng
