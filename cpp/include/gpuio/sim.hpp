// The flash simulator (DESIGN.md layer 0): a deterministic discrete-event SSD model.
//
// Model: a request is split into flash pages; every page reserves the resources it needs in time order
// (host link, channel bus, plane array) as "busy until" timestamps, so one page costs O(1) and the model
// allocates nothing per request. Host queues are NVMe-style submission queues of a fixed depth: a request
// waits in its queue until a slot frees (a per-queue heap of completion times). Writes land in a DRAM write
// buffer and complete to the host there; the buffer programs them to flash in the background and holds the
// slot until the program ends, so a host that writes faster than the flash feels back-pressure.
// The FTL maps 4 KiB-class logical pages to physical pages (page-level), keeps over-provisioned blocks
// spare and runs greedy GC (victim = fewest valid pages) per plane when its free blocks run low.
//
// Determinism: no wall clock, no unordered containers, one seeded generator (splitmix64) for synthetic
// workloads; the same config, seed and requests give byte-identical Stats::to_json().
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gpuio::sim {

struct Geometry {
  uint32_t channels = 8;
  uint32_t packages_per_channel = 1;
  uint32_t dies_per_package = 4;
  uint32_t planes_per_die = 2;
  uint32_t blocks_per_plane = 512;
  uint32_t pages_per_block = 256;
  uint32_t page_bytes = 4096;

  uint64_t planes() const { return uint64_t{channels} * packages_per_channel * dies_per_package * planes_per_die; }
  uint64_t blocks() const { return planes() * blocks_per_plane; }
  uint64_t pages() const { return blocks() * pages_per_block; }
  uint64_t bytes() const { return pages() * page_bytes; }
};

struct Timings {
  uint32_t read_ns = 3000;            // array read (tR)
  uint32_t program_ns = 100000;       // array program (tPROG)
  uint32_t erase_ns = 1000000;        // block erase (tBERS)
  uint32_t channel_mb_s = 800;        // flash bus per channel (MB/s = bytes/us)
  uint32_t host_mb_s = 3200;          // host link (PCIe) shared by all queues
  uint32_t controller_ns = 2000;      // command processing in the controller, per request
  uint32_t buffer_ns = 500;           // DRAM write-buffer access, per page
};

struct SsdConfig {
  std::string name = "custom";
  Geometry geometry;
  Timings timings;
  double overprovision = 0.07;        // fraction of physical pages hidden from the host
  uint32_t gc_free_blocks_min = 2;    // a plane runs GC when it has fewer free blocks than this (>= 2)
  uint32_t write_buffer_pages = 4096; // DRAM write buffer (0: writes go straight to flash)
  uint32_t host_queues = 1;           // NVMe submission/completion queue pairs
  uint32_t queue_depth = 64;          // entries per host queue
  double prefill = 0.0;               // fraction of logical pages mapped before the run (steady-state GC)
  uint64_t seed = 1;                  // synthetic workloads and prefill order
};

// Presets: "znand" (Z-NAND SLC, 3 us read / 100 us program), "tlc" (datacenter TLC SSD).
// Throws std::invalid_argument naming the unknown preset and listing the known ones.
SsdConfig preset(const std::string& name);
std::vector<std::string> preset_names();
// Throws std::invalid_argument naming the first bad field.
void validate(const SsdConfig& c);

struct Request {
  uint64_t arrival_ns = 0;
  uint64_t offset = 0;   // bytes from the device start (folded into the logical capacity by the model)
  uint32_t bytes = 0;
  bool write = false;
  uint32_t queue = 0;    // host queue (taken modulo host_queues)
};

struct LatencySummary {
  uint64_t count = 0;
  uint64_t mean_ns = 0, p50_ns = 0, p99_ns = 0, p999_ns = 0, max_ns = 0;
};

struct Stats {
  uint64_t requests = 0, reads = 0, writes = 0;
  uint64_t bytes_read = 0, bytes_written = 0;
  uint64_t first_arrival_ns = 0, last_completion_ns = 0;
  double iops = 0, read_mb_s = 0, write_mb_s = 0;  // over [first_arrival, last_completion]
  LatencySummary all, read, write;                 // completion - issue (issue: a host-queue slot was free)
  uint64_t host_pages_written = 0;    // logical pages the host wrote
  uint64_t flash_pages_programmed = 0;  // host + GC programs
  uint64_t gc_pages_moved = 0;
  uint64_t gc_runs = 0;                // victim blocks collected
  uint64_t erases = 0;
  uint64_t buffer_read_hits = 0;       // read pages served from the DRAM write buffer
  uint64_t buffer_coalesced = 0;       // writes that replaced a page still in the buffer
  uint64_t queue_full_waits = 0;       // requests that waited for a host-queue slot
  uint64_t folded_requests = 0;        // requests whose offset lay beyond the capacity and were folded
  double waf = 0;                      // flash_pages_programmed / host_pages_written (0 when none)
  std::string to_json() const;         // fixed field order and formatting: byte-identical for equal stats
};

class Ssd {
 public:
  explicit Ssd(const SsdConfig& cfg);  // validates cfg
  ~Ssd();
  Ssd(Ssd&&) noexcept;
  Ssd& operator=(Ssd&&) noexcept;

  // Submit one request at its arrival time; returns its completion time (ns). Requests must come in
  // nondecreasing arrival order per host queue; the host queue delays issue while it is full.
  uint64_t submit(const Request& r);
  // Issue time of the last submitted request (arrival or later when its queue was full).
  uint64_t last_issue_ns() const;
  // Programs every page still in the write buffer; returns when the last program ends.
  uint64_t flush(uint64_t now_ns);
  Stats stats() const;
  const SsdConfig& config() const;
  uint64_t logical_bytes() const;

  // FTL introspection (tests): physical page of a logical page, or UINT64_MAX when unmapped.
  uint64_t physical_page(uint64_t logical_page) const;
  uint32_t valid_pages(uint64_t block) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Block traces. Each parser throws std::invalid_argument naming the file, line number and bad field.
// DiskSim ASCII: "time device lba sectors flags" with flags bit 0: 1 = read, 0 = write; 512 B sectors.
// Time: DiskSim's own, milliseconds with a decimal fraction ("12.500"), or integer nanoseconds (the
// converted form some trace sets use). time_unit "ms" or "ns" says which; "auto" reads the whole file as
// milliseconds when any time has a '.', else as nanoseconds. The device number picks the host queue;
// every device of the trace maps onto the one simulated SSD.
std::vector<Request> parse_disksim(const std::string& path, const std::string& time_unit = "auto");
// blkparse default text output; only queue ('Q') events are taken: "maj,min cpu seq time_s pid Q RWBS
// sector + sectors [proc]". Time is seconds with a fraction.
std::vector<Request> parse_blkparse(const std::string& path);
// "disksim" or "blkparse" from the file's first data line; throws naming the file when neither fits.
std::string detect_trace_format(const std::string& path);

// The most requests one synthetic workload holds: the whole trace is built in memory first (sizeof(Request)
// bytes each, 32: 8 GiB at this limit), so a count beyond it is refused before anything is allocated.
constexpr uint64_t workload_requests_max = 1ull << 28;

struct Workload {
  uint64_t requests = 100000;     // [1, workload_requests_max]
  uint32_t request_bytes = 4096;
  double read_ratio = 1.0;        // fraction of reads
  bool sequential = false;        // else uniform random over span_bytes
  uint64_t span_bytes = 0;        // 0: the device's logical capacity
  uint32_t queue_depth = 32;      // closed loop: outstanding requests per host queue
  uint32_t queues = 1;
  uint64_t seed = 1;
};
// Closed-loop synthetic workload: every request arrives at time 0 and issues when its queue has a free slot,
// so the queue depth is what stays outstanding (run_workload sets the config's queues and depth from w).
// Requests go round-robin over w.queues. Throws std::invalid_argument naming a bad field.
std::vector<Request> synthesize(const Workload& w, uint64_t device_bytes);
Stats run_workload(SsdConfig cfg, const Workload& w);

// Run requests through a fresh SSD (queue_depth/host_queues taken from the config) and flush the buffer.
Stats replay(const SsdConfig& cfg, const std::vector<Request>& reqs);

}  // namespace gpuio::sim
