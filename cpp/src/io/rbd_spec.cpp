// Volume names (io/rbd.hpp): compiled into libgpuio and into libgpuio_rbd.so.1, which both parse them.
#include <stdexcept>

#include "io/rbd.hpp"

namespace gpuio::rbd {

Spec Spec::parse(const std::string& text) {
  std::string t = text.rfind("rbd:", 0) == 0 ? text.substr(4) : text;
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t slash = t.find('/', start);
    parts.push_back(t.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  bool ok = (parts.size() == 2 || parts.size() == 3);
  for (const std::string& p : parts) ok = ok && !p.empty() && p.find_first_of(" \t\n@") == std::string::npos;
  if (!ok) {
    throw std::invalid_argument("volume '" + text + "' must be rbd:POOL/IMAGE or rbd:POOL/NAMESPACE/IMAGE");
  }
  Spec s;
  s.pool = parts[0];
  s.ns = parts.size() == 3 ? parts[1] : "";
  s.image = parts.back();
  return s;
}

std::string Spec::str() const { return "rbd:" + pool + "/" + (ns.empty() ? "" : ns + "/") + image; }

}  // namespace gpuio::rbd
