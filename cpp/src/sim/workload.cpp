// Synthetic closed-loop workloads and the replay driver.
#include <algorithm>
#include <stdexcept>

#include "gpuio/sim.hpp"

namespace gpuio::sim {
namespace {
uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

std::vector<Request> synthesize(const Workload& w, uint64_t device_bytes) {
  auto bad = [](const std::string& f) { throw std::invalid_argument("workload: " + f); };
  if (w.request_bytes == 0 || w.request_bytes % 512) bad("request_bytes=" + std::to_string(w.request_bytes) + " must be a positive multiple of 512");
  if (w.read_ratio < 0 || w.read_ratio > 1) bad("read_ratio=" + std::to_string(w.read_ratio) + " must lie in [0, 1]");
  if (w.queues == 0) bad("queues=0 must be > 0");
  if (w.queue_depth == 0) bad("queue_depth=0 must be > 0");
  if (w.requests == 0 || w.requests > workload_requests_max)
    bad("requests=" + std::to_string(w.requests) + " must lie in [1, " + std::to_string(workload_requests_max) +
        "] (the trace is built in memory, " + std::to_string(sizeof(Request)) + " bytes per request)");
  uint64_t span = w.span_bytes ? std::min(w.span_bytes, device_bytes) : device_bytes;
  uint64_t slots = span / w.request_bytes;
  if (slots == 0) bad("span of " + std::to_string(span) + " bytes holds no request of " + std::to_string(w.request_bytes));
  std::vector<Request> out(w.requests);
  uint64_t s = w.seed;
  for (uint64_t i = 0; i < w.requests; ++i) {
    Request& r = out[i];
    uint64_t slot = w.sequential ? i % slots : splitmix64(s) % slots;
    r.offset = slot * w.request_bytes;
    r.bytes = w.request_bytes;
    r.write = static_cast<double>(splitmix64(s) >> 11) * 0x1.0p-53 >= w.read_ratio;
    r.queue = static_cast<uint32_t>(i % w.queues);
  }
  return out;
}

Stats replay(const SsdConfig& cfg, const std::vector<Request>& reqs) {
  Ssd ssd(cfg);
  uint64_t end = 0;
  for (const Request& r : reqs) end = std::max(end, ssd.submit(r));
  ssd.flush(end);
  return ssd.stats();
}

Stats run_workload(SsdConfig cfg, const Workload& w) {
  cfg.host_queues = w.queues;
  cfg.queue_depth = w.queue_depth;
  validate(cfg);
  const Geometry& g = cfg.geometry;  // the FTL's logical capacity (ftl.cpp)
  uint64_t logical = static_cast<uint64_t>(static_cast<double>(g.pages()) * (1.0 - cfg.overprovision)) * g.page_bytes;
  return replay(cfg, synthesize(w, logical));
}

}  // namespace gpuio::sim
