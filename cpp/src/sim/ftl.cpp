#include "sim/ftl.hpp"

#include "gpuio/status.hpp"

namespace gpuio::sim::detail {

Ftl::Ftl(const Geometry& g, double overprovision, uint32_t gc_free_blocks_min)
    : g_(g), gc_min_(gc_free_blocks_min), pages_per_plane_(uint64_t{g.blocks_per_plane} * g.pages_per_block) {
  logical_pages_ = static_cast<uint64_t>(static_cast<double>(g.pages()) * (1.0 - overprovision));
  l2p_.assign(logical_pages_, kUnmapped);
  p2l_.assign(g.pages(), kUnmapped);
  valid_.assign(g.blocks(), 0);
  moving_.resize(g.pages_per_block);
  state_.assign(g.blocks(), 0);
  planes_.resize(g.planes());
  for (uint32_t p = 0; p < planes_.size(); ++p) {
    Plane& pl = planes_[p];
    pl.free.reserve(g.blocks_per_plane);
    for (uint32_t b = g.blocks_per_plane; b-- > 0;) pl.free.push_back(p * g.blocks_per_plane + b);
    open_block(pl);
  }
}

void Ftl::open_block(Plane& p) {
  GPUIO_ASSERT(!p.free.empty(), "FTL: a plane ran out of free blocks");
  p.active = p.free.back();
  p.free.pop_back();
  state_[p.active] = 1;
  p.next_page = 0;
}

uint32_t Ftl::append(uint32_t plane, uint32_t lpn) {
  Plane& p = planes_[plane];
  if (p.next_page == g_.pages_per_block) {
    state_[p.active] = 2;
    open_block(p);
  }
  uint32_t ppn = p.active * g_.pages_per_block + p.next_page++;
  p2l_[ppn] = lpn;
  l2p_[lpn] = ppn;
  ++valid_[p.active];
  ++programs_;
  return ppn;
}

uint32_t Ftl::write(uint64_t lpn, GcWork& gc) {
  GPUIO_ASSERT(lpn < logical_pages_, "FTL: logical page out of range");
  uint32_t old = l2p_[lpn];
  if (old != kUnmapped) {
    p2l_[old] = kUnmapped;
    --valid_[old / g_.pages_per_block];
  }
  uint32_t plane = next_plane_;
  next_plane_ = (next_plane_ + 1) % static_cast<uint32_t>(planes_.size());
  if (planes_[plane].free.size() < gc_min_) collect(plane, gc);
  return append(plane, static_cast<uint32_t>(lpn));
}

void Ftl::collect(uint32_t plane, GcWork& gc) {
  Plane& p = planes_[plane];
  while (p.free.size() < gc_min_) {
    uint32_t first = plane * g_.blocks_per_plane;
    uint32_t victim = kUnmapped, best = g_.pages_per_block + 1;
    for (uint32_t b = first; b < first + g_.blocks_per_plane; ++b)
      if (state_[b] == 2 && valid_[b] < best) best = valid_[b], victim = b;
    GPUIO_ASSERT(victim != kUnmapped, "FTL GC: no closed block to collect");
    GPUIO_ASSERT(best < g_.pages_per_block, "FTL GC: every closed block is fully valid (over-provisioning too small)");
    // Two passes: collect the victim's live pages while prefetching their l2p entries (random lines of a
    // table far larger than the CPU caches; one miss per moved page was most of the model's time under
    // steady-state GC), then move them.
    uint32_t* page = &p2l_[uint64_t{victim} * g_.pages_per_block];
    uint32_t live = 0;
    for (uint32_t i = 0; i < g_.pages_per_block; ++i) {
      uint32_t lpn = page[i];
      if (lpn == kUnmapped) continue;
      __builtin_prefetch(&l2p_[lpn], 1);
      moving_[live++] = lpn;
      page[i] = kUnmapped;
    }
    valid_[victim] -= live;
    for (uint32_t i = 0; i < live; ++i) append(plane, moving_[i]);
    gc.pages_moved += live;
    gc_moved_ += live;
    state_[victim] = 0;
    p.free.push_back(victim);
    ++gc.blocks_erased;
    ++gc_runs_;
    ++erases_;
  }
}

}  // namespace gpuio::sim::detail
