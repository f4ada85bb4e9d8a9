// GPU memory-access trace text format: "cycle warp pc address size r|w".
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "gpuio/zng.hpp"
#include "sim/trace_text.hpp"

namespace gpuio::zng {
namespace {

uint64_t number(sim::detail::LineCursor& c, const char* field) {
  std::string_view t = c.token();
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    uint64_t v = 0;
    if (t.size() > 18) c.fail(field, t, "overflows 64 bits");
    for (size_t i = 2; i < t.size(); ++i) {
      char ch = t[i];
      int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
      if (d < 0) c.fail(field, t, "is not a hex number");
      v = v * 16 + static_cast<uint64_t>(d);
    }
    return v;
  }
  uint64_t v = 0;
  if (t.empty()) c.fail(field, t, "is missing");
  for (char ch : t) {
    if (ch < '0' || ch > '9') c.fail(field, t, "is not a number");
    v = v * 10 + static_cast<uint64_t>(ch - '0');
  }
  return v;
}

}  // namespace

std::vector<Access> parse_trace(const std::string& path) {
  std::string text = sim::detail::read_text_file(path);
  std::vector<Access> out;
  sim::detail::for_each_line(path, text, [&](sim::detail::LineCursor& c, uint64_t) {
    Access a;
    a.cycle = number(c, "cycle");
    a.warp = static_cast<uint32_t>(number(c, "warp"));
    a.pc = static_cast<uint32_t>(number(c, "pc"));
    a.addr = number(c, "address");
    uint64_t size = number(c, "size");
    if (size == 0 || size > 4096) c.fail("size", std::to_string(size), "must lie in [1, 4096]");
    a.bytes = static_cast<uint32_t>(size);
    std::string_view rw = c.token();
    if (rw == "r" || rw == "R")
      a.write = false;
    else if (rw == "w" || rw == "W")
      a.write = true;
    else
      c.fail("r/w", rw, "must be r or w");
    if (!c.at_end()) c.fail("end of line", c.token(), "is extra text (expected 6 fields)");
    out.push_back(a);
  });
  return out;
}

void write_trace(const std::string& path, const std::vector<Access>& trace) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::invalid_argument("cannot write trace '" + path + "'");
  std::fprintf(f, "# cycle warp pc address size r/w\n");
  for (const Access& a : trace)
    std::fprintf(f, "%llu %u 0x%x 0x%llx %u %c\n", static_cast<unsigned long long>(a.cycle), a.warp, a.pc,
                 static_cast<unsigned long long>(a.addr), a.bytes, a.write ? 'w' : 'r');
  if (std::fclose(f) != 0) throw std::invalid_argument("cannot write trace '" + path + "'");
}

}  // namespace gpuio::zng
