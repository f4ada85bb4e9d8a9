// DiskSim ASCII traces: "time device lba sectors flags", flags bit 0 set = read (DiskSim's convention); time in
// DiskSim's milliseconds ("0.250") or in integer nanoseconds (see sim.hpp).
#include <fstream>
#include <sstream>

#include "gpuio/sim.hpp"
#include "sim/trace_text.hpp"

namespace gpuio::sim {
namespace detail {

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::invalid_argument("cannot open trace '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace detail

std::vector<Request> parse_disksim(const std::string& path, const std::string& time_unit) {
  if (time_unit != "auto" && time_unit != "ms" && time_unit != "ns")
    throw std::invalid_argument("time_unit '" + time_unit + "' must be auto, ms or ns");
  std::string text = detail::read_text_file(path);
  bool ms = time_unit == "ms";
  if (time_unit == "auto")  // DiskSim's milliseconds when any time has a fraction, else integer ns
    detail::for_each_line(path, text, [&](detail::LineCursor& c, uint64_t) {
      if (!ms) ms = c.token().find('.') != std::string_view::npos;
    });
  const char* time_field = ms ? "time_ms" : "time_ns";
  std::vector<Request> out;
  out.reserve(text.size() / 24);
  uint64_t prev_time = 0;
  detail::for_each_line(path, text, [&](detail::LineCursor& c, uint64_t) {
    Request r;
    r.arrival_ns = c.decimal_ns(time_field, c.token(), ms ? 6 : 0);
    r.queue = static_cast<uint32_t>(c.u64("device"));
    uint64_t lba = c.u64("lba");
    uint64_t sectors = c.u64("sectors");
    uint64_t flags = c.u64("flags");
    if (!c.at_end()) c.fail("end of line", c.token(), "is extra text (expected 5 fields)");
    if (sectors == 0 || sectors > (1u << 21)) c.fail("sectors", std::to_string(sectors), "must lie in [1, 2^21]");
    if (r.arrival_ns < prev_time) c.fail(time_field, std::to_string(r.arrival_ns) + " ns", "goes back in time");
    prev_time = r.arrival_ns;
    r.offset = lba * 512;
    r.bytes = static_cast<uint32_t>(sectors * 512);
    r.write = (flags & 1) == 0;
    out.push_back(r);
  });
  return out;
}

std::string detect_trace_format(const std::string& path) {
  std::string text = detail::read_text_file(path);
  std::string fmt;
  detail::for_each_line(path, text, [&](detail::LineCursor& c, uint64_t) {
    if (!fmt.empty()) return;
    std::string_view first = c.token();
    fmt = first.find(',') != std::string_view::npos ? "blkparse" : "disksim";
  });
  if (fmt.empty()) throw std::invalid_argument("trace '" + path + "' has no data lines");
  return fmt;
}

}  // namespace gpuio::sim
