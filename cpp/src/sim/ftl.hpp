// Page-level FTL: logical page -> physical page, with over-provisioning and greedy GC per plane.
// Physical page = block * pages_per_block + page; block = plane * blocks_per_plane + b. Host writes go
// round-robin over planes, each plane appending to its active block. When a plane's free blocks drop below
// gc_free_blocks_min, GC picks the closed block with the fewest valid pages (lowest index on ties), copies
// its valid pages back within the plane (copyback) and erases it. Single owner thread; no allocation after
// construction.
#pragma once
#include <cstdint>
#include <vector>

#include "gpuio/sim.hpp"

namespace gpuio::sim::detail {

struct GcWork {  // GC done on one plane while placing a page; the timing model charges it to that plane
  uint32_t pages_moved = 0;
  uint32_t blocks_erased = 0;
};

class Ftl {
 public:
  static constexpr uint32_t kUnmapped = 0xFFFFFFFFu;
  Ftl(const Geometry& g, double overprovision, uint32_t gc_free_blocks_min);

  uint64_t logical_pages() const { return logical_pages_; }
  uint32_t lookup(uint64_t lpn) const { return l2p_[lpn]; }
  // Cache hints for a write of lpn that comes soon: its l2p entry, and (once that is cached) the reverse
  // entry of the physical page it will invalidate. No effect on the model.
  void prefetch_map(uint64_t lpn) const { __builtin_prefetch(&l2p_[lpn], 1); }
  void prefetch_old(uint64_t lpn) const {
    uint32_t old = l2p_[lpn];
    if (old != kUnmapped) __builtin_prefetch(&p2l_[old], 1);
  }
  // Map lpn to a fresh physical page (invalidating the old one). GC work on the chosen plane goes to gc.
  uint32_t write(uint64_t lpn, GcWork& gc);
  uint32_t plane_of(uint32_t ppn) const { return ppn / pages_per_plane_; }
  uint32_t valid_pages(uint64_t block) const { return valid_[block]; }

  uint64_t programs() const { return programs_; }  // host + GC programs
  uint64_t gc_pages_moved() const { return gc_moved_; }
  uint64_t gc_runs() const { return gc_runs_; }
  uint64_t erases() const { return erases_; }
  uint32_t free_blocks(uint32_t plane) const { return static_cast<uint32_t>(planes_[plane].free.size()); }

 private:
  struct Plane {
    std::vector<uint32_t> free;    // free blocks (global index), used as a stack
    uint32_t active = kUnmapped;   // block being filled
    uint32_t next_page = 0;        // next page in active
  };
  uint32_t append(uint32_t plane, uint32_t lpn);  // program lpn into the plane's active block
  void collect(uint32_t plane, GcWork& gc);
  void open_block(Plane& p);

  Geometry g_;
  uint32_t gc_min_;
  uint64_t logical_pages_;
  uint64_t pages_per_plane_;
  std::vector<uint32_t> l2p_, p2l_;
  std::vector<uint32_t> valid_;    // valid pages per block
  std::vector<uint32_t> moving_;   // GC: the victim's live logical pages (pages_per_block entries)
  std::vector<uint8_t> state_;     // per block: 0 free, 1 active, 2 closed
  std::vector<Plane> planes_;
  uint32_t next_plane_ = 0;
  uint64_t programs_ = 0, gc_moved_ = 0, gc_runs_ = 0, erases_ = 0;
};

}  // namespace gpuio::sim::detail
