// The ZnG trace-driven run: warps replay their accesses in time order (a heap of warps keyed by the time
// of their next access); loads block their warp, stores do not. L2 in front of the platform's memory.
#include <algorithm>
#include <functional>
#include <memory>
#include <queue>
#include <stdexcept>

#include "gpuio/zng.hpp"
#include "sim/zng_cache.hpp"
#include "sim/zng_flash.hpp"

namespace gpuio::zng {
namespace {

class Model {
 public:
  Model(const ZngConfig& c, ZngResult& r)
      : c_(c), r_(r), l2_(c.l2_bytes, c.l2_ways, c.l2_line_bytes), flash_(c, r),
        monitor_(c.prefetch_bytes_initial, c.prefetch_bytes_min, c.prefetch_bytes_max, c.monitor_epoch_lines) {
    if (dram_platform()) {
      dram_ = std::make_unique<detail::TagCache>(c.dram_bytes, 16, c.page_bytes);
      if (c.firmware_cores == 0) throw std::invalid_argument("ZnG: firmware_cores must be > 0");
      fw_free_.assign(c.firmware_cores, 0);
    }
  }
  bool dram_platform() const { return c_.platform == Platform::hetero || c_.platform == Platform::hybridgpu; }

  // One access at t; returns when its data is there (stores: when L2 took them).
  uint64_t access(const Access& a, uint64_t t) {
    const uint32_t lb = c_.l2_line_bytes;
    uint64_t done = t;
    for (uint64_t line = a.addr / lb * lb; line < a.addr + a.bytes; line += lb)
      done = std::max(done, a.write ? store(line, t) : load(line, a.pc, t));
    return done;
  }

  void finish(uint64_t t) {
    l2_.for_each_valid([&](detail::CacheLine& l) {
      if (l.prefetched) ++r_.prefetch_wasted_lines, predictor_.feedback(l.pc, false);
      if (l.dirty) write_back(l.tag * c_.l2_line_bytes, t);
    });
    if (dram_) dram_->for_each_valid([&](detail::CacheLine& p) {
      if (p.dirty) flash_.program_page(p.tag, true, t), r_.written_back_bytes += c_.page_bytes;
    });
    flash_.flush(t);
    r_.predictor_accuracy = predictor_.prefetch_accuracy();
    r_.predictor_decision_accuracy = predictor_.accuracy();
    r_.monitor_halvings = monitor_.halvings();
    r_.monitor_growths = monitor_.growths();
    r_.prefetch_bytes_final = c_.read_prefetch ? monitor_.prefetch_bytes() : 0;
  }

 private:
  uint64_t store(uint64_t line, uint64_t t) {
    detail::CacheLine* l = l2_.find(line);
    if (l) {
      ++r_.l2_hits;
    } else {
      ++r_.l2_misses;  // write-allocate without a fetch: GPU L2 keeps per-sector valid bits
      l = fill(line, t);
      l->ready = t;
    }
    l->dirty = true;
    if (l->prefetched) used_prefetch(*l);
    if (!l->pinned && pinned_ < c_.pin_lines_max && flash_.thrashing() && flash_.recently_evicted(flash_.page_of(line))) {
      l->pinned = true;
      r_.pinned_lines_peak = std::max<uint64_t>(r_.pinned_lines_peak, ++pinned_);
    }
    return t + c_.l2_hit_ns;
  }

  uint64_t load(uint64_t line, uint32_t pc, uint64_t t) {
    if (detail::CacheLine* l = l2_.find(line)) {
      ++r_.l2_hits;  // a line still being filled is a hit on its miss entry: it waits for the fill
      if (l->prefetched) used_prefetch(*l);
      return std::max(t, l->ready) + c_.l2_hit_ns;
    }
    ++r_.l2_misses;
    const uint32_t lb = c_.l2_line_bytes;
    if (c_.read_prefetch && predictor_.observe(pc, line, uint64_t{monitor_.prefetch_bytes()} + c_.page_bytes)) {
      // The window: whole lines, aligned to its size in lines (the monitor's sizes need not be powers of two).
      uint64_t win_lines = std::max<uint64_t>(1, (monitor_.prefetch_bytes() + lb - 1) / lb), win = win_lines * lb;
      uint64_t start = line / win * win, end = start + win, pb = c_.page_bytes;
      // Page by page, the demanded line's page first; each line is ready when its page has arrived.
      uint64_t dp = line / pb * pb, d0 = std::max(start, dp), d1 = std::min(end, dp + pb);
      uint64_t done = memory_read(d0, static_cast<uint32_t>(d1 - d0), t);
      uint32_t fetched = prefetch_fill(d0, d1, line, pc, t, done);
      for (uint64_t p0 = start; p0 < end;) {
        uint64_t p1 = std::min(end, (p0 / pb + 1) * pb);
        if (p0 != d0) fetched += prefetch_fill(p0, p1, line, pc, t, memory_read(p0, static_cast<uint32_t>(p1 - p0), t));
        p0 = p1;
      }
      ++r_.prefetches;
      r_.prefetched_lines += fetched;
      monitor_.prefetched(fetched);
      fill(line, t)->ready = done;
      return done + c_.l2_hit_ns;
    }
    uint64_t done = memory_read(line, lb, t);
    fill(line, t)->ready = done;
    return done + c_.l2_hit_ns;
  }

  // Lines of [from, to) other than the demanded one and those L2 already holds, ready at `ready`.
  uint32_t prefetch_fill(uint64_t from, uint64_t to, uint64_t demanded, uint32_t pc, uint64_t t, uint64_t ready) {
    uint32_t n = 0;
    for (uint64_t a = from; a < to; a += c_.l2_line_bytes) {
      if (a == demanded || l2_.find(a)) continue;
      detail::CacheLine* p = fill(a, t);  // normal LRU position: only the predictor gates prefetches
      p->prefetched = true, p->pc = pc, p->ready = ready;
      ++n;
    }
    return n;
  }

  void used_prefetch(detail::CacheLine& l) {
    l.prefetched = false;
    ++r_.prefetch_used_lines;
    predictor_.feedback(l.pc, true);
  }

  detail::CacheLine* fill(uint64_t line, uint64_t t, bool prefetch = false) {
    detail::CacheLine victim;
    detail::CacheLine* l = l2_.insert(line, victim, prefetch);
    if (victim.valid) {
      if (victim.prefetched) ++r_.prefetch_wasted_lines, monitor_.wasted(1), predictor_.feedback(victim.pc, false);
      if (victim.pinned) --pinned_;
      if (victim.dirty) write_back(victim.tag * c_.l2_line_bytes, t);
    }
    return l;
  }

  uint64_t firmware(uint64_t t) {  // the SSD controller's FTL work on its earliest free core
    auto it = std::min_element(fw_free_.begin(), fw_free_.end());
    *it = std::max(*it, t) + c_.firmware_ns;
    return *it;
  }
  uint64_t host_path(uint64_t t, uint64_t bytes) {  // hetero: host stack, then PCIe
    uint64_t s = std::max(t + c_.host_ns, pcie_free_);
    pcie_free_ = s + (bytes * 1000 + c_.pcie_mb_s - 1) / c_.pcie_mb_s;
    return pcie_free_;
  }
  uint64_t dram_xfer(uint64_t t, uint64_t bytes) {
    uint64_t s = std::max(t, dram_free_);
    dram_free_ = s + (bytes * 1000 + c_.dram_mb_s - 1) / c_.dram_mb_s;
    return dram_free_ + c_.dram_ns;
  }

  // DRAM platforms: the page must be in GPU DRAM (fetched from flash on a miss).
  detail::CacheLine* dram_page(uint64_t addr, uint64_t t, uint64_t& ready) {
    uint64_t page = addr / c_.page_bytes;
    ready = t;
    if (detail::CacheLine* p = dram_->find(page * c_.page_bytes)) {
      ++r_.dram_hits;
      return p;
    }
    ++r_.dram_misses;
    uint64_t s = c_.platform == Platform::hybridgpu ? firmware(t) : t;
    ready = flash_.read(page * c_.page_bytes, c_.page_bytes, s);
    if (c_.platform == Platform::hetero) ready = host_path(ready, c_.page_bytes);
    detail::CacheLine victim;
    detail::CacheLine* p = dram_->insert(page * c_.page_bytes, victim);
    if (victim.valid && victim.dirty) {
      uint64_t w = c_.platform == Platform::hybridgpu ? firmware(t) : host_path(t, c_.page_bytes);
      r_.written_back_bytes += c_.page_bytes;
      flash_.program_page(victim.tag, true, w);
    }
    return p;
  }

  uint64_t memory_read(uint64_t addr, uint32_t bytes, uint64_t t) {
    if (!dram_) return flash_.read(addr, bytes, t);
    uint64_t ready;
    dram_page(addr, t, ready);
    return dram_xfer(ready, bytes);
  }

  void write_back(uint64_t line, uint64_t t) {
    if (!dram_) {
      flash_.write_back(line, c_.l2_line_bytes, t);
      return;
    }
    uint64_t ready;
    dram_page(line, t, ready)->dirty = true;
    dram_xfer(ready, c_.l2_line_bytes);
  }

  const ZngConfig& c_;
  ZngResult& r_;
  detail::TagCache l2_;
  detail::Flash flash_;
  std::unique_ptr<detail::TagCache> dram_;
  Predictor predictor_;
  AccessMonitor monitor_;
  std::vector<uint64_t> fw_free_;
  uint64_t pcie_free_ = 0, dram_free_ = 0, pinned_ = 0;
};

}  // namespace

ZngResult run(const ZngConfig& cfg, const std::vector<Access>& trace) {
  ZngResult r;
  r.platform = platform_name(cfg.platform);
  if (!(cfg.gpu_ghz > 0)) throw std::invalid_argument("ZnG: gpu_ghz must be > 0");
  Model m(cfg, r);
  // Per-warp access lists (CSR) in trace order.
  uint32_t warps = 0;
  for (const Access& a : trace) warps = std::max(warps, a.warp + 1);
  std::vector<uint32_t> start(warps + 1, 0), order(trace.size());
  for (const Access& a : trace) ++start[a.warp + 1];
  for (uint32_t w = 0; w < warps; ++w) start[w + 1] += start[w];
  std::vector<uint32_t> pos(start.begin(), start.end() - 1);
  for (uint32_t i = 0; i < trace.size(); ++i) order[pos[trace[i].warp]++] = i;
  std::vector<uint64_t> shift(warps, 0), ready(warps, 0);
  std::vector<uint32_t> next(start.begin(), start.end() - 1);
  auto ns = [&](uint64_t cycle) { return static_cast<uint64_t>(static_cast<double>(cycle) / cfg.gpu_ghz); };
  using Item = std::pair<uint64_t, uint32_t>;  // (time, warp): ties go to the lower warp
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  for (uint32_t w = 0; w < warps; ++w)
    if (start[w] < start[w + 1]) heap.push({ns(trace[order[start[w]]].cycle), w});
  uint64_t end = 0;
  while (!heap.empty()) {
    auto [t, w] = heap.top();
    heap.pop();
    const Access& a = trace[order[next[w]++]];
    uint64_t done = m.access(a, t);
    ++r.accesses;
    r.gpu_bytes += a.bytes;
    if (a.write) {
      ++r.write_accesses;
    } else {
      ++r.read_accesses;
      ready[w] = done;
    }
    end = std::max(end, done);
    if (next[w] == start[w + 1]) continue;
    uint64_t tn = ns(trace[order[next[w]]].cycle) + shift[w];
    if (tn < ready[w]) shift[w] += ready[w] - tn, tn = ready[w];
    heap.push({tn, w});
  }
  m.finish(end);
  r.runtime_ns = end;
  if (end) {
    r.bandwidth_gb_s = static_cast<double>(r.gpu_bytes) / static_cast<double>(end);
    r.flash_bandwidth_gb_s = static_cast<double>(r.flash_read_bytes + r.written_back_bytes) / static_cast<double>(end);
  }
  r.write_redundancy = r.written_back_bytes
                           ? static_cast<double>(r.flash_programs) * cfg.page_bytes / static_cast<double>(r.written_back_bytes)
                           : 0.0;
  return r;
}

}  // namespace gpuio::zng
