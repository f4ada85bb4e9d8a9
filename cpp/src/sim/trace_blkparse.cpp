// blkparse default text output. Only queue ('Q') events become requests; other actions are skipped, and so
// is the per-CPU summary blkparse prints at the end.
#include "gpuio/sim.hpp"
#include "sim/trace_text.hpp"

namespace gpuio::sim {

std::vector<Request> parse_blkparse(const std::string& path) {
  std::string text = detail::read_text_file(path);
  std::vector<Request> out;
  bool trailer = false;
  detail::for_each_line(path, text, [&](detail::LineCursor& c, uint64_t) {
    std::string_view dev = c.token();
    if (trailer) return;
    if (dev.find(',') == std::string_view::npos) {
      if (dev == "CPU0" || dev.rfind("CPU", 0) == 0 || dev == "Total") {
        trailer = true;  // summary section
        return;
      }
      c.fail("device", dev, "is not 'major,minor'");
    }
    uint64_t cpu = c.u64("cpu");
    c.u64("sequence");
    uint64_t t = c.decimal_ns("time", c.token(), 9);  // seconds.fraction
    c.u64("pid");
    std::string_view action = c.token();
    if (action != "Q") return;
    std::string_view rwbs = c.token();
    bool w = rwbs.find('W') != std::string_view::npos, r = rwbs.find('R') != std::string_view::npos;
    if (rwbs.empty()) c.fail("rwbs", rwbs, "is missing");
    if (!w && !r) return;  // flush, discard, ...: no data
    uint64_t sector = c.u64("sector");
    if (c.token() != "+") c.fail("'+'", "", "is missing between sector and size");
    uint64_t sectors = c.u64("sectors");
    if (sectors == 0) return;  // barrier-style empty request
    Request q;
    q.arrival_ns = t;
    q.offset = sector * 512;
    q.bytes = static_cast<uint32_t>(sectors * 512);
    q.write = w;
    q.queue = static_cast<uint32_t>(cpu);
    out.push_back(q);
  });
  // blkparse merges per-CPU streams by time, but keep replay's contract: nondecreasing arrivals.
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].arrival_ns < out[i - 1].arrival_ns) out[i].arrival_ns = out[i - 1].arrival_ns;
  return out;
}

}  // namespace gpuio::sim
