// gpuio-raw: the raw-device reference (raw.hpp) as a command, for a shell or a GPU machine without Python.
//   gpuio-raw FILE [--block-bytes N] [--queue-depth N] [--threads N] [--seconds S] [--ops-max N]
//                  [--psync] [--sequential] [--write] [--buffered]
// Prints one JSON line: {"file", "block_bytes", "queue_depth", "threads", "engine", "pattern", "op", "ops", "bytes",
// "seconds", "cpu_seconds", "iops", "mb_s"}. A bad option is refused with one line naming it and its value (exit
// status 2); a failed I/O is one line with errno's text (exit status 1).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include "gpuio/status.hpp"
#include "raw.hpp"

namespace {

const char* kUsage =
    "usage: gpuio-raw FILE [--block-bytes N] [--queue-depth N] [--threads N] [--seconds S] [--ops-max N]\n"
    "                 [--psync] [--sequential] [--write] [--buffered]\n";

struct BadOption : std::runtime_error {
  using std::runtime_error::runtime_error;
};

uint64_t whole(const std::string& opt, const char* text, uint64_t max) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno || end == text || *end || text[0] == '-' || v > max) {
    throw BadOption(opt + " '" + text + "': not a whole number in [0, " + std::to_string(max) + "]");
  }
  return v;
}

double seconds(const std::string& opt, const char* text) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno || end == text || *end || !(v > 0) || v > 86400) {
    throw BadOption(opt + " '" + text + "': not a number of seconds in (0, 86400]");
  }
  return v;
}

gpuio::bench::RawOptions parse(int argc, char** argv) {
  gpuio::bench::RawOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw BadOption(a + ": needs a value");
      return argv[++i];
    };
    if (a == "--block-bytes") {
      o.block_bytes = static_cast<uint32_t>(whole(a, value(), 1u << 30));
    } else if (a == "--queue-depth") {
      o.queue_depth = static_cast<uint32_t>(whole(a, value(), 4096));
    } else if (a == "--threads") {
      o.threads = static_cast<uint32_t>(whole(a, value(), 256));
    } else if (a == "--seconds") {
      o.seconds = seconds(a, value());
    } else if (a == "--ops-max") {
      o.ops_max = whole(a, value(), uint64_t(1) << 48);
    } else if (a == "--psync") {
      o.uring = false;
    } else if (a == "--sequential") {
      o.sequential = true;
    } else if (a == "--write") {
      o.write = true;
    } else if (a == "--buffered") {
      o.direct = false;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (!a.empty() && a[0] == '-') {
      throw BadOption(a + ": unknown option");
    } else if (o.path.empty()) {
      o.path = a;
    } else {
      throw BadOption("'" + a + "': a second FILE (one file per run)");
    }
  }
  if (o.path.empty()) throw BadOption("FILE: missing");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  gpuio::bench::RawOptions o;
  try {
    o = parse(argc, argv);
  } catch (const BadOption& e) {
    std::fprintf(stderr, "gpuio-raw: error: %s\n%s", e.what(), kUsage);
    return 2;
  }
  try {
    gpuio::bench::RawResult r = gpuio::bench::run_raw(o);
    std::string file;
    for (char c : o.path) {  // JSON string: escape what a path may hold
      if (c == '"' || c == '\\') file += '\\';
      file += c;
    }
    std::printf(
        "{\"file\": \"%s\", \"block_bytes\": %u, \"queue_depth\": %u, \"threads\": %u, \"engine\": \"%s\", "
        "\"pattern\": \"%s\", \"op\": \"%s\", \"direct\": %s, \"ops\": %llu, \"bytes\": %llu, \"seconds\": %.6f, "
        "\"cpu_seconds\": %.6f, \"iops\": %.1f, \"mb_s\": %.1f}\n",
        file.c_str(), o.block_bytes, o.uring ? o.queue_depth : 1, o.threads, o.uring ? "uring" : "psync",
        o.sequential ? "seq" : "rand", o.write ? "write" : "read", o.direct ? "true" : "false",
        static_cast<unsigned long long>(r.ops), static_cast<unsigned long long>(r.bytes), r.seconds, r.cpu_seconds,
        r.seconds > 0 ? r.ops / r.seconds : 0.0, r.seconds > 0 ? r.bytes / r.seconds / 1e6 : 0.0);
    return 0;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "gpuio-raw: error: %s\n", e.what());
    return 2;
  } catch (const gpuio::IoError& e) {
    std::fprintf(stderr, "gpuio-raw: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpuio-raw: error: %s\n", e.what());
    return 1;
  }
}
