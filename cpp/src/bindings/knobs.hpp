// Options dicts read through the knob tables (gpuio/knobs.hpp): each key the table names is taken out of the
// dict, type-checked (TypeError naming the key and the value) and range- or choice-checked by its knob before it
// is narrowed into the struct; defaults and the table itself go to Python the same way (gpuio.defaults).
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "bindings/options.hpp"
#include "gpuio/knobs.hpp"

namespace gpuio::bindings {

// Takes every key of d that a knob of table names (with all of `flags`, when given) into o.
template <class Options>
void take_knobs(nanobind::dict& d, Options& o, const std::vector<Knob<Options>>& table, uint8_t flags = 0) {
  for (const Knob<Options>& k : table) {
    if ((k.flags & flags) != flags || !d.contains(k.name)) continue;
    nanobind::object v = d[k.name];
    nanobind::del(d[k.name]);
    std::visit(
        [&](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, bool>) {
            if (!nanobind::isinstance<nanobind::bool_>(v)) wrong_type(k.name, "a bool", v);
            *p = nanobind::cast<bool>(v);
          } else if constexpr (std::is_same_v<T, std::string>) {
            if (!nanobind::isinstance<nanobind::str>(v)) wrong_type(k.name, "a str", v);
            std::string s = nanobind::cast<std::string>(v);
            check_knob(k, s);
            *p = std::move(s);
          } else if constexpr (std::is_same_v<T, double>) {
            if (nanobind::isinstance<nanobind::bool_>(v) ||
                !(nanobind::isinstance<nanobind::float_>(v) || nanobind::hasattr(v, "__index__")))
              wrong_type(k.name, "a number", v);
            *p = nanobind::cast<double>(nanobind::float_(v));
          } else {
            int64_t x = int_value(k.name, v);
            check_knob(k, x);
            *p = static_cast<T>(x);
          }
        },
        k.field(o));
  }
}

inline nanobind::object knob_value(const KnobField& f) {
  return std::visit([](auto* p) -> nanobind::object { return nanobind::cast(*p); }, f);
}

// The default of every knob: a default-constructed Options read through the table.
template <class Options>
nanobind::dict knob_defaults(const std::vector<Knob<Options>>& table) {
  Options o;
  nanobind::dict d;
  for (const Knob<Options>& k : table) d[k.name] = knob_value(k.field(o));
  return d;
}

// The table as Python sees it: per knob name, default, type (int, bool, str, float), min and max (None: the
// field type's range only), choices (a tuple; empty: any text), pow2, per_target and doc.
template <class Options>
nanobind::list knob_rows(const std::vector<Knob<Options>>& table) {
  Options o;
  nanobind::list rows;
  for (const Knob<Options>& k : table) {
    nanobind::dict r;
    KnobField f = k.field(o);
    r["name"] = k.name;
    r["default"] = knob_value(f);
    r["type"] = std::visit(
        [](auto* p) -> const char* {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, bool>) return "bool";
          else if constexpr (std::is_same_v<T, std::string>) return "str";
          else if constexpr (std::is_same_v<T, double>) return "float";
          else return "int";
        },
        f);
    bool ranged = k.min <= k.max;  // a range of its own (the field type's is checked but not listed)
    r["min"] = ranged ? nanobind::object(nanobind::int_(k.min)) : nanobind::none();
    r["max"] = ranged ? nanobind::object(nanobind::int_(k.max)) : nanobind::none();
    nanobind::list choices;
    std::string c = k.choices;
    for (size_t at = 0; !c.empty();) {
      size_t bar = c.find('|', at);
      choices.append(nanobind::str(c.substr(at, bar == std::string::npos ? std::string::npos : bar - at).c_str()));
      if (bar == std::string::npos) break;
      at = bar + 1;
    }
    r["choices"] = nanobind::tuple(choices);
    r["pow2"] = (k.flags & knob_pow2) != 0;
    r["per_target"] = (k.flags & knob_per_target) != 0;
    r["doc"] = k.doc;
    rows.append(r);
  }
  return rows;
}

}  // namespace gpuio::bindings
