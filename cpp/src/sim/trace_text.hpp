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
