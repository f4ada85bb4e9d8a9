// Stats as JSON with a fixed field order and fixed float formatting, so equal runs give equal bytes.
#include <cstdio>
#include <string>

#include "gpuio/sim.hpp"

namespace gpuio::sim {
namespace {

void field(std::string& out, const char* name, uint64_t v) {
  out += '"';
  out += name;
  out += "\": " + std::to_string(v) + ", ";
}
void field(std::string& out, const char* name, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "\"%s\": %.6f, ", name, v);
  out += buf;
}
void field(std::string& out, const char* name, const LatencySummary& l) {
  out += '"';
  out += name;
  out += "\": {";
  std::string in;
  field(in, "count", l.count);
  field(in, "mean_ns", l.mean_ns);
  field(in, "p50_ns", l.p50_ns);
  field(in, "p99_ns", l.p99_ns);
  field(in, "p999_ns", l.p999_ns);
  field(in, "max_ns", l.max_ns);
  in.resize(in.size() - 2);
  out += in + "}, ";
}

}  // namespace

std::string Stats::to_json() const {
  std::string o = "{";
  field(o, "requests", requests);
  field(o, "reads", reads);
  field(o, "writes", writes);
  field(o, "bytes_read", bytes_read);
  field(o, "bytes_written", bytes_written);
  field(o, "first_arrival_ns", first_arrival_ns);
  field(o, "last_completion_ns", last_completion_ns);
  field(o, "iops", iops);
  field(o, "read_mb_s", read_mb_s);
  field(o, "write_mb_s", write_mb_s);
  field(o, "latency", all);
  field(o, "read_latency", read);
  field(o, "write_latency", write);
  field(o, "host_pages_written", host_pages_written);
  field(o, "flash_pages_programmed", flash_pages_programmed);
  field(o, "gc_pages_moved", gc_pages_moved);
  field(o, "gc_runs", gc_runs);
  field(o, "erases", erases);
  field(o, "buffer_read_hits", buffer_read_hits);
  field(o, "buffer_coalesced", buffer_coalesced);
  field(o, "queue_full_waits", queue_full_waits);
  field(o, "folded_requests", folded_requests);
  field(o, "waf", waf);
  o.resize(o.size() - 2);
  return o + "}";
}

}  // namespace gpuio::sim
