// Options dicts from Python: copy, take known keys one by one, then name whatever is left over.
// Python keeps the documented defaults (gpuio/engine.py, gpuio/gpu.py); C++ fills only what was given.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <stdexcept>
#include <string>

namespace gpuio::bindings {

inline nanobind::dict copy_dict(nanobind::handle given) {
  return nanobind::cast<nanobind::dict>(given.attr("copy")());
}

// Removes key from d and returns its value, or fallback when absent.
template <typename T>
T take(nanobind::dict& d, const char* key, T fallback) {
  if (!d.contains(key)) return fallback;
  T v = nanobind::cast<T>(d[key]);
  nanobind::del(d[key]);
  return v;
}

// Removes key from d and returns its value as a dict of its own (a copy), or nothing when absent or None:
// a nested options section such as the engine's sim=dict(...) or fault=dict(...).
inline std::optional<nanobind::dict> take_section(nanobind::dict& d, const char* key) {
  if (!d.contains(key)) return std::nullopt;
  nanobind::object v = d[key];
  nanobind::del(d[key]);
  if (v.is_none()) return std::nullopt;
  return copy_dict(v);
}

// Every key left in d is a typo: name them.
inline void reject_unknown(const nanobind::dict& d, const char* what) {
  if (d.size() == 0) return;
  throw std::invalid_argument(std::string("unknown ") + what + " option(s): " +
                              nanobind::cast<std::string>(nanobind::str(d.attr("keys")())));
}

}  // namespace gpuio::bindings
