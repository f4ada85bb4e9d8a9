// Set-associative LRU cache of tags (no data): GPU L2 (128 B lines) and the DRAM page cache of the
// DRAM platforms (4 KiB pages). Lines carry the flags the ZnG model needs. LRU by a per-cache clock;
// pinned lines are skipped by replacement while an unpinned way exists. No allocation after construction.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpuio::zng::detail {

struct CacheLine {
  uint64_t tag = 0;
  uint64_t stamp = 0;
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
  }
  uint32_t line_bytes() const { return line_; }
  // The line holding addr, or nullptr. A hit refreshes LRU.
  CacheLine* find(uint64_t addr) {
    uint64_t tag = addr / line_;
    CacheLine* set = &lines_[(tag % sets_) * ways_];
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
    CacheLine* set = &lines_[(tag % sets_) * ways_];
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
    *v = CacheLine{tag, stamp, true, false, false, false};
    return v;
  }
  template <class Fn>
  void for_each_valid(Fn&& fn) {
    for (CacheLine& l : lines_)
      if (l.valid) fn(l);
  }

 private:
  uint32_t ways_, line_;
  uint64_t sets_ = 0, clock_ = 0;
  std::vector<CacheLine> lines_;
};

}  // namespace gpuio::zng::detail
