// Line/field scanning shared by the trace parsers: the whole file is read once, fields are parsed in
// place (no per-line allocation), and every error names the file, line number and the offending text.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace gpuio::sim::detail {

std::string read_text_file(const std::string& path);  // throws std::invalid_argument naming the path

class LineCursor {
 public:
  LineCursor(const std::string& path, std::string_view line, uint64_t line_no)
      : path_(path), line_(line), line_no_(line_no) {}
  bool at_end() {
    skip_space();
    return pos_ >= line_.size();
  }
  std::string_view token() {
    skip_space();
    size_t b = pos_;
    while (pos_ < line_.size() && line_[pos_] != ' ' && line_[pos_] != '\t' && line_[pos_] != '\r') ++pos_;
    return line_.substr(b, pos_ - b);
  }
  uint64_t u64(const char* field) {
    std::string_view t = token();
    if (t.empty()) fail(field, t, "is missing");
    uint64_t v = 0;
    for (char c : t) {
      if (c < '0' || c > '9') fail(field, t, "is not an unsigned integer");
      uint64_t d = static_cast<uint64_t>(c - '0');
      if (v > (UINT64_MAX - d) / 10) fail(field, t, "overflows 64 bits");
      v = v * 10 + d;
    }
    return v;
  }
  // A decimal number of units ("12.5"), in nanoseconds, exactly (no floating point): ns_digits is log10 of
  // the nanoseconds per unit (9: seconds, 6: milliseconds, 0: nanoseconds, where no fraction is allowed).
  // Fraction digits finer than a nanosecond are dropped.
  uint64_t decimal_ns(const char* field, std::string_view t, int ns_digits) {
    if (t.empty()) fail(field, t, "is missing");
    const char* what = ns_digits ? "is not a decimal number (e.g. 12.5)" : "is not an unsigned integer";
    uint64_t whole = 0, frac = 0;
    int digits = 0, seen = 0;
    size_t i = 0;
    for (; i < t.size() && t[i] != '.'; ++i, ++seen) {
      if (t[i] < '0' || t[i] > '9') fail(field, t, what);
      uint64_t d = static_cast<uint64_t>(t[i] - '0');
      if (whole > (UINT64_MAX - d) / 10) fail(field, t, "overflows 64 bits");
      whole = whole * 10 + d;
    }
    if (i < t.size() && ns_digits == 0) fail(field, t, what);
    for (++i; i < t.size(); ++i, ++seen) {
      if (t[i] < '0' || t[i] > '9') fail(field, t, what);
      if (digits < ns_digits) frac = frac * 10 + static_cast<uint64_t>(t[i] - '0'), ++digits;
    }
    if (seen == 0) fail(field, t, what);
    uint64_t scale = 1;
    for (int k = 0; k < ns_digits; ++k) scale *= 10;
    for (; digits < ns_digits; ++digits) frac *= 10;
    if (whole > (UINT64_MAX - frac) / scale) fail(field, t, "overflows 64 bits of nanoseconds");
    return whole * scale + frac;
  }
  [[noreturn]] void fail(const char* field, std::string_view tok, const char* why) const {
    throw std::invalid_argument(path_ + ":" + std::to_string(line_no_) + ": field '" + field + "' = '" +
                                std::string(tok) + "' " + why + " (line: '" + std::string(line_) + "')");
  }

 private:
  void skip_space() {
    while (pos_ < line_.size() && (line_[pos_] == ' ' || line_[pos_] == '\t' || line_[pos_] == '\r')) ++pos_;
  }
  const std::string& path_;
  std::string_view line_;
  uint64_t line_no_;
  size_t pos_ = 0;
};

// Calls fn(cursor, line_no) for every line that is neither blank nor a '#' comment.
template <class Fn>
void for_each_line(const std::string& path, const std::string& text, Fn&& fn) {
  uint64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    ++line_no;
    pos = end + 1;
    size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos || line[first] == '#') continue;
    LineCursor c(path, line, line_no);
    fn(c, line_no);
  }
}

}  // namespace gpuio::sim::detail
