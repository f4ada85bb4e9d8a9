// ZngResult as JSON: fixed order and formatting so equal runs give equal bytes.
#include <cstdio>
#include <string>

#include "gpuio/zng.hpp"

namespace gpuio::zng {

std::string ZngResult::to_json() const {
  std::string o = "{\"platform\": \"" + platform + "\"";
  auto u = [&](const char* k, uint64_t v) { o += std::string(", \"") + k + "\": " + std::to_string(v); };
  auto d = [&](const char* k, double v) {
    char b[64];
    std::snprintf(b, sizeof b, ", \"%s\": %.6f", k, v);
    o += b;
  };
  u("accesses", accesses), u("read_accesses", read_accesses), u("write_accesses", write_accesses);
  u("gpu_bytes", gpu_bytes), u("runtime_ns", runtime_ns);
  d("bandwidth_gb_s", bandwidth_gb_s), d("flash_bandwidth_gb_s", flash_bandwidth_gb_s);
  u("l2_hits", l2_hits), u("l2_misses", l2_misses);
  u("flash_reads", flash_reads), u("register_read_hits", register_read_hits), u("flash_read_bytes", flash_read_bytes);
  u("flash_programs", flash_programs), u("written_back_bytes", written_back_bytes);
  d("write_redundancy", write_redundancy);
  u("register_write_hits", register_write_hits), u("register_evictions", register_evictions);
  u("thrash_events", thrash_events), u("pinned_lines_peak", pinned_lines_peak);
  u("gc_runs", gc_runs), u("gc_pages_moved", gc_pages_moved);
  u("prefetches", prefetches), u("prefetched_lines", prefetched_lines);
  u("prefetch_used_lines", prefetch_used_lines), u("prefetch_wasted_lines", prefetch_wasted_lines);
  d("predictor_accuracy", predictor_accuracy), d("predictor_decision_accuracy", predictor_decision_accuracy);
  u("monitor_halvings", monitor_halvings), u("monitor_growths", monitor_growths);
  u("prefetch_bytes_final", prefetch_bytes_final);
  u("dram_hits", dram_hits), u("dram_misses", dram_misses);
  return o + "}";
}

}  // namespace gpuio::zng
