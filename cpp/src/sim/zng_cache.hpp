// Set-associative LRU cache of tags (no data): GPU L2 (128 B lines) and the DRAM page cache of the
// DRAM platforms (4 KiB pages). Lines carry the flags the ZnG model needs. LRU by a per-cache clock;
// pinned lines are skipped by replacement while an unpinned way exists. No allocation after construction.
// The set index XOR-folds the upper tag bits into the lower ones (as GPU L2s hash addresses over their
// slices and sets): without it, arrays whose bases differ by a multiple of the set span map line for line
// onto the same sets, and streams over them (c[i] = a[i] + b[i]) evict each other's lines.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpuio::zng::detail {

struct CacheLine {
  uint64_t tag = 0;
  uint64_t stamp = 0;
  uint64_t ready = 0;  // when the line's data is there (a fill in flight: later hits wait for it)
  uint32_t pc = 0;     // prefetched lines: the load instruction whose miss prefetched them
  bool valid = false, dirty = false, prefetched = false, pinned = false;
};

class TagCache {
 public:
  TagCache(uint64_t bytes, uint32_t ways, uint32_t line_bytes) : ways_(ways), line_(line_bytes) {
    uint64_t lines = bytes / line_bytes;
    if (ways == 0 || lines < ways || lines % ways)
      throw std::invalid_argument("cache of " + std::to_string(bytes) + " bytes cannot have " + std::to_string(ways) +
                                  " ways of " + std::to_string(line_bytes) + " B lines");
    sets_ = lines / ways;
    lines_.resize(lines);
    while ((uint64_t{1} << set_bits_) < sets_) ++set_bits_;
  }
  uint32_t line_bytes() const { return line_; }
  // The line holding addr, or nullptr. A hit refreshes LRU.
  CacheLine* find(uint64_t addr) {
    uint64_t tag = addr / line_;
    CacheLine* set = &lines_[set_of(tag) * ways_];
    for (uint32_t i = 0; i < ways_; ++i)
      if (set[i].valid && set[i].tag == tag) {
        set[i].stamp = ++clock_;
        return &set[i];
      }
    return nullptr;
  }
  // Make room for addr (which must not be present): victim gets the evicted line's old contents.
  // low_priority inserts at the LRU end (prefetched lines: evicted first unless used), so a prefetch
  // never pushes out a line the program touched more recently.
  CacheLine* insert(uint64_t addr, CacheLine& victim, bool low_priority = false) {
    uint64_t tag = addr / line_;
    CacheLine* set = &lines_[set_of(tag) * ways_];
    CacheLine* v = nullptr;
    for (uint32_t i = 0; i < ways_ && !v; ++i)
      if (!set[i].valid) v = &set[i];
    for (int pass = 0; pass < 2 && !v; ++pass)  // pass 0 skips pinned lines
      for (uint32_t i = 0; i < ways_; ++i)
        if ((pass == 1 || !set[i].pinned) && (!v || set[i].stamp < v->stamp)) v = &set[i];
    victim = *v;
    uint64_t stamp = ++clock_;
    if (low_priority) {
      stamp = 0;
      for (uint32_t i = 0; i < ways_; ++i)
        if (&set[i] != v && set[i].valid && (stamp == 0 || set[i].stamp < stamp)) stamp = set[i].stamp;
      stamp = stamp ? stamp - 1 : 0;
    }
    *v = CacheLine{tag, stamp, 0, 0, true, false, false, false};
    return v;
  }
  template <class Fn>
  void for_each_valid(Fn&& fn) {
    for (CacheLine& l : lines_)
      if (l.valid) fn(l);
  }

 private:
  uint64_t set_of(uint64_t tag) const {
    uint64_t h = tag;
    if (set_bits_)
      for (uint64_t x = tag >> set_bits_; x; x >>= set_bits_) h ^= x;
    return h % sets_;
  }
  uint32_t ways_, line_, set_bits_ = 0;
  uint64_t sets_ = 0, clock_ = 0;
  std::vector<CacheLine> lines_;
};

}  // namespace gpuio::zng::detail
