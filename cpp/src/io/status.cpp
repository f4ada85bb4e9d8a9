#include "gpuio/status.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpuio::detail {

void assert_fail(const char* expr, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "gpuio: internal assertion failed: %s (%s) at %s:%d\n", expr, msg, file, line);
  std::abort();
}

std::string errno_name(int err) {
  const char* name = strerrorname_np(err);
  std::string s = name ? name : ("errno " + std::to_string(err));
  s += " (";
  s += std::strerror(err);
  s += ")";
  return s;
}

}  // namespace gpuio::detail
