// The knobs of gpuio's options structs: one table per struct (engine_knobs(), gpu_knobs(), sim_knobs(),
// fault_knobs(), rbd_knobs()). A row names one field by the name Python uses for it (a gpuio.Engine keyword, a GPU
// option, a key of the engine's sim=/fault=/rbd= dicts), with its range or choices and what it does. The tables are
// the one place ranges and docs live: validate() checks a struct through them, the Python bindings read, default
// and check values through them, and gpuio.defaults lists them (doc and range included).
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace gpuio {

struct EngineOptions;
struct GpuOptions;
struct SimOptions;
struct FaultOptions;
struct RbdOptions;

// Where a knob's value lives in its options struct.
using KnobField = std::variant<uint32_t*, uint64_t*, int32_t*, int64_t*, bool*, double*, std::string*>;

enum KnobFlags : uint8_t {
  knob_pow2 = 1,        // integers: a power of two as well
  knob_per_target = 2,  // engine: a per-file choice (TargetOptions) as well as the engine's first target's
};

template <class Options>
struct Knob {
  const char* name;
  KnobField (*field)(Options&);
  const char* doc;
  int64_t min = 1;           // integers: inclusive range; min > max: the field type's own range (doubles: the
                             // backend that takes them checks them)
  int64_t max = 0;
  const char* choices = "";  // strings: the values allowed, "a|b|c"; "": any text
  uint8_t flags = 0;         // KnobFlags
};

const std::vector<Knob<EngineOptions>>& engine_knobs();
const std::vector<Knob<GpuOptions>>& gpu_knobs();
const std::vector<Knob<SimOptions>>& sim_knobs();
const std::vector<Knob<FaultOptions>>& fault_knobs();
const std::vector<Knob<RbdOptions>>& rbd_knobs();

namespace detail {
[[noreturn]] void knob_out_of_range(const char* name, const std::string& value, int64_t min, int64_t max, bool pow2);
[[noreturn]] void knob_not_a_choice(const char* name, const std::string& value, const char* choices);
[[noreturn]] void knob_unknown(const std::string& name, const char* table);
}  // namespace detail

// The inclusive range a knob's value must lie in: its own, else its field type's (clamped to int64).
template <class Options>
std::pair<int64_t, int64_t> knob_range(const Knob<Options>& k) {
  if (k.min <= k.max) return {k.min, k.max};
  Options o;
  return std::visit(
      [](auto* p) -> std::pair<int64_t, int64_t> {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          using L = std::numeric_limits<T>;
          constexpr int64_t top = std::numeric_limits<int64_t>::max();
          return {int64_t(L::min()), L::max() > uint64_t(top) ? top : int64_t(L::max())};
        } else {
          return {1, 0};  // no range
        }
      },
      k.field(o));
}

// Throws std::invalid_argument "NAME=VALUE must lie in [MIN, MAX]" ("... a power of two in" for pow2 knobs).
template <class Options>
void check_knob(const Knob<Options>& k, int64_t value) {
  auto [lo, hi] = knob_range(k);
  bool pow2 = (k.flags & knob_pow2) != 0;
  if (lo <= hi && (value < lo || value > hi || (pow2 && (value <= 0 || (value & (value - 1))))))
    detail::knob_out_of_range(k.name, std::to_string(value), lo, hi, pow2);
}

// Throws std::invalid_argument "NAME='VALUE' is not one of a, b, c" when the knob has choices.
template <class Options>
void check_knob(const Knob<Options>& k, const std::string& value) {
  if (!*k.choices) return;
  std::string c = k.choices;
  for (size_t at = 0;;) {
    size_t bar = c.find('|', at);
    if (c.compare(at, bar == std::string::npos ? std::string::npos : bar - at, value) == 0) return;
    if (bar == std::string::npos) break;
    at = bar + 1;
  }
  detail::knob_not_a_choice(k.name, value, k.choices);
}

template <class Options>
const Knob<Options>& find_knob(const std::vector<Knob<Options>>& table, const std::string& name, const char* what) {
  for (const Knob<Options>& k : table)
    if (name == k.name) return k;
  detail::knob_unknown(name, what);
}

// Every knob of o in its range or among its choices (the table's order: the first bad one is named).
template <class Options>
void check_knobs(const std::vector<Knob<Options>>& table, const Options& given) {
  Options& o = const_cast<Options&>(given);  // the field accessors serve reads and writes; this only reads
  for (const Knob<Options>& k : table) {
    std::visit(
        [&](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, std::string>) {
            check_knob(k, *p);
          } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            if constexpr (std::is_same_v<T, uint64_t>) {
              if (*p > uint64_t(std::numeric_limits<int64_t>::max())) {
                auto [lo, hi] = knob_range(k);
                detail::knob_out_of_range(k.name, std::to_string(*p), lo, hi, false);
              }
            }
            check_knob(k, static_cast<int64_t>(*p));
          }
        },
        k.field(o));
  }
}

}  // namespace gpuio
