// Options dicts from Python: copy, take known keys one by one, then name whatever is left over.
// Defaults come from the C++ option structs (Python reads them through _core.engine_defaults()); every
// value is type-checked here (TypeError naming the key and the value) and integers are range-checked
// before they are narrowed, so -1 or 2**70 is a ValueError naming the option, never std::bad_cast.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace gpuio::bindings {

inline nanobind::dict copy_dict(nanobind::handle given) {
  if (!nanobind::isinstance<nanobind::dict>(given))
    throw nanobind::type_error(("options must be a dict, got " + nanobind::cast<std::string>(nanobind::repr(given)))
                                   .c_str());
  return nanobind::cast<nanobind::dict>(given.attr("copy")());
}

inline std::string repr_of(nanobind::handle v) {
  std::string r = nanobind::cast<std::string>(nanobind::repr(v));
  return r.size() > 80 ? r.substr(0, 77) + "..." : r;
}

[[noreturn]] inline void wrong_type(const char* key, const char* want, nanobind::handle v) {
  throw nanobind::type_error((std::string(key) + " must be " + want + ", got " +
                              nanobind::cast<std::string>(nanobind::str(v.type().attr("__name__"))) + " " + repr_of(v))
                                 .c_str());
}

// A Python int (or NumPy integer; never a bool or a float) as int64, or a ValueError naming key when it
// does not fit. check(key, value) then applies the knob's own range (e.g. gpuio::check_option).
inline int64_t int_value(const char* key, nanobind::handle v) {
  if (nanobind::isinstance<nanobind::bool_>(v) || !nanobind::hasattr(v, "__index__") ||
      nanobind::isinstance<nanobind::float_>(v))
    wrong_type(key, "an int", v);
  nanobind::object i = v.attr("__index__")();
  nanobind::object lo = nanobind::int_(std::numeric_limits<int64_t>::min());
  nanobind::object hi = nanobind::int_(std::numeric_limits<int64_t>::max());
  if (i < lo || i > hi)
    throw std::invalid_argument(std::string(key) + "=" + repr_of(i) + " is outside the 64-bit range");
  return nanobind::cast<int64_t>(i);
}

// Removes key from d and returns its value, or fallback when absent. Integers go through check (default:
// the range of T); bools must be bool; strings str; doubles int or float.
template <typename T>
T take(nanobind::dict& d, const char* key, T fallback,
       const std::function<void(const std::string&, int64_t)>& check = nullptr) {
  if (!d.contains(key)) return fallback;
  nanobind::object v = d[key];
  nanobind::del(d[key]);
  if constexpr (std::is_same_v<T, bool>) {
    if (!nanobind::isinstance<nanobind::bool_>(v)) wrong_type(key, "a bool", v);
    return nanobind::cast<bool>(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!nanobind::isinstance<nanobind::str>(v)) wrong_type(key, "a str", v);
    return nanobind::cast<std::string>(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (nanobind::isinstance<nanobind::bool_>(v) ||
        !(nanobind::isinstance<nanobind::float_>(v) || nanobind::hasattr(v, "__index__")))
      wrong_type(key, "a number", v);
    return nanobind::cast<T>(nanobind::float_(v));
  } else {
    int64_t x = int_value(key, v);
    if (check) {
      check(key, x);
    } else {
      using L = std::numeric_limits<T>;
      constexpr int64_t hi = L::max() > uint64_t(std::numeric_limits<int64_t>::max())
                                 ? std::numeric_limits<int64_t>::max()
                                 : int64_t(L::max());
      if (x < int64_t(L::min()) || x > hi)
        throw std::invalid_argument(std::string(key) + "=" + std::to_string(x) + " must lie in [" +
                                    std::to_string(int64_t(L::min())) + ", " + std::to_string(hi) + "]");
    }
    return static_cast<T>(x);
  }
}

// Removes key from d and returns its value as a dict of its own (a copy), or nothing when absent or None:
// a nested options section such as the engine's sim=dict(...) or fault=dict(...).
inline std::optional<nanobind::dict> take_section(nanobind::dict& d, const char* key) {
  if (!d.contains(key)) return std::nullopt;
  nanobind::object v = d[key];
  nanobind::del(d[key]);
  if (v.is_none()) return std::nullopt;
  if (!nanobind::isinstance<nanobind::dict>(v)) wrong_type(key, "a dict or None", v);
  return copy_dict(v);
}

// Every key left in d is a typo: name them.
inline void reject_unknown(const nanobind::dict& d, const char* what) {
  if (d.size() == 0) return;
  throw std::invalid_argument(std::string("unknown ") + what + " option(s): " +
                              nanobind::cast<std::string>(nanobind::str(d.attr("keys")())));
}

}  // namespace gpuio::bindings
