// Timing of the SSD model: resources are "busy until" timestamps reserved in submission order.
// Host link (shared) -> controller -> DRAM write buffer / channel bus -> plane array.
#include <algorithm>
#include <functional>

#include "gpuio/sim.hpp"
#include "gpuio/status.hpp"
#include "sim/ftl.hpp"
#include "sim/latency.hpp"
#include "sim/timeline.hpp"

namespace gpuio::sim {

struct Ssd::Impl {
  static constexpr uint32_t kNoSlot = 0xFFFFFFFFu;
  struct Slot {  // one DRAM write-buffer page; dirty until its program is issued
    uint32_t lpn = detail::Ftl::kUnmapped;
    bool dirty = false;
  };

  SsdConfig cfg;
  detail::Ftl ftl;
  std::vector<uint64_t> plane_free;
  std::vector<detail::Timeline> chans;
  detail::Timeline host;
  uint64_t now = 0;  // issue time of the request being handled: intervals before it are history
  std::vector<std::vector<uint64_t>> queues;  // per host queue: min-heap of completion times
  std::vector<Slot> slots;                    // write buffer, a FIFO ring
  std::vector<uint32_t> slot_of;              // logical page -> buffer slot, or kNoSlot
  uint32_t ring_head = 0;
  uint64_t page_xfer_ns, last_issue = 0;
  detail::LatencyHistogram lat_all, lat_read, lat_write;
  Stats st;

  explicit Impl(const SsdConfig& c)
      : cfg((validate(c), c)), ftl(c.geometry, c.overprovision, c.gc_free_blocks_min) {
    plane_free.assign(c.geometry.planes(), 0);
    chans.resize(c.geometry.channels);
    queues.resize(c.host_queues);
    for (auto& q : queues) q.reserve(c.queue_depth);
    slots.resize(c.write_buffer_pages);
    if (c.write_buffer_pages) slot_of.assign(ftl.logical_pages(), kNoSlot);
    page_xfer_ns = xfer_ns(c.geometry.page_bytes, c.timings.channel_mb_s);
    if (c.prefill > 0) prefill();
  }

  static uint64_t xfer_ns(uint64_t bytes, uint32_t mb_s) { return (bytes * 1000 + mb_s - 1) / mb_s; }

  // Map a fraction of the logical pages in a seeded random order, with no time cost, so a run starts in
  // steady state (GC active) instead of on an empty drive.
  void prefill() {
    uint64_t n = static_cast<uint64_t>(cfg.prefill * static_cast<double>(ftl.logical_pages()));
    uint64_t x = cfg.seed * 0x9E3779B97F4A7C15ull + 1;
    detail::GcWork gc;
    for (uint64_t i = 0; i < n; ++i) ftl.write(i, gc);
    for (uint64_t i = 0; i < n / 2; ++i) {  // overwrite half of it at random: valid counts spread out
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      ftl.write(x % n, gc);
    }
    st = Stats{};  // prefill is not part of the run's statistics
    baseline_programs = ftl.programs(), baseline_moved = ftl.gc_pages_moved();
    baseline_runs = ftl.gc_runs(), baseline_erases = ftl.erases();
  }
  uint64_t baseline_programs = 0, baseline_moved = 0, baseline_runs = 0, baseline_erases = 0;

  uint32_t channel_of(uint32_t plane) const { return plane % cfg.geometry.channels; }

  // Read one flash page; returns when its data is in the controller.
  uint64_t read_page(uint64_t lpn, uint64_t t) {
    if (!slot_of.empty() && slot_of[lpn] != kNoSlot) {
      ++st.buffer_read_hits;
      return t + cfg.timings.buffer_ns;
    }
    uint32_t ppn = ftl.lookup(lpn);
    // Never written in this run: traces start on a drive that already holds data, so the page is read from
    // where a sequential fill would have put it.
    uint32_t plane = ppn == detail::Ftl::kUnmapped ? static_cast<uint32_t>(lpn % plane_free.size()) : ftl.plane_of(ppn);
    uint64_t& pf = plane_free[plane];
    uint64_t array_end = std::max(t, pf) + cfg.timings.read_ns;
    uint64_t xfer_end = chans[channel_of(plane)].reserve(array_end, page_xfer_ns, now);
    pf = xfer_end;  // the page register holds the data until the bus took it
    return xfer_end;
  }

  // Program one page (from the buffer or straight from the host); returns when the bus took the data
  // (the buffer slot is free again) and sets program_end.
  uint64_t program_page(uint64_t lpn, uint64_t t, uint64_t& program_end) {
    detail::GcWork gc;
    uint32_t ppn = ftl.write(lpn, gc);
    uint32_t plane = ftl.plane_of(ppn);
    uint64_t& pf = plane_free[plane];
    const Timings& tm = cfg.timings;
    if (gc.pages_moved || gc.blocks_erased)  // foreground GC: copyback and erase occupy the plane first
      pf = std::max(t, pf) + uint64_t{gc.pages_moved} * (tm.read_ns + tm.program_ns) +
           uint64_t{gc.blocks_erased} * tm.erase_ns;
    uint64_t xfer_end = chans[channel_of(plane)].reserve(std::max(t, pf), page_xfer_ns, now);
    program_end = xfer_end + tm.program_ns;
    pf = program_end;
    return xfer_end;
  }

  uint64_t write_page(uint64_t lpn, uint64_t t) {
    uint64_t program_end;
    if (slots.empty()) {
      program_page(lpn, t, program_end);
      return program_end;
    }
    uint32_t s = slot_of[lpn];
    if (s != kNoSlot) {  // still buffered: overwrite in DRAM
      if (slots[s].dirty) ++st.buffer_coalesced;
      slots[s].dirty = true;
      return t + cfg.timings.buffer_ns;
    }
    uint32_t h = ring_head, n = static_cast<uint32_t>(slots.size());
    ring_head = (ring_head + 1) % n;
    // The FIFO says which pages the next evictions will program: start their map lookups now, so the
    // cache misses of a large drive's tables overlap instead of queueing one after another.
    if (n > 16) {
      uint32_t far = slots[(h + 16) % n].lpn, near = slots[(h + 8) % n].lpn;
      if (far != detail::Ftl::kUnmapped) ftl.prefetch_map(far), __builtin_prefetch(&slot_of[far], 1);
      if (near != detail::Ftl::kUnmapped) ftl.prefetch_old(near);
    }
    Slot& slot = slots[h];
    uint64_t ready = t;
    if (slot.lpn != detail::Ftl::kUnmapped) {
      if (slot.dirty) ready = program_page(slot.lpn, t, program_end);  // evict: the slot frees once the bus took it
      if (slot_of[slot.lpn] == h) slot_of[slot.lpn] = kNoSlot;
    }
    slot.lpn = static_cast<uint32_t>(lpn);
    slot.dirty = true;
    slot_of[lpn] = h;
    return ready + cfg.timings.buffer_ns;
  }

  uint64_t submit(const Request& r) {
    GPUIO_EXPECT(r.bytes > 0, "sim request of 0 bytes at offset " + std::to_string(r.offset));
    auto& q = queues[r.queue % queues.size()];
    uint64_t issue = r.arrival_ns;
    if (q.size() == cfg.queue_depth) {
      std::pop_heap(q.begin(), q.end(), std::greater<>());
      if (q.back() > issue) issue = q.back(), ++st.queue_full_waits;
      q.pop_back();
    }
    last_issue = issue;
    now = issue;
    const uint32_t pb = cfg.geometry.page_bytes;
    uint64_t cap = ftl.logical_pages() * pb, off = r.offset;
    if (off + r.bytes > cap) {
      off %= cap;
      if (off + r.bytes > cap) off = 0;
      ++st.folded_requests;
    }
    uint64_t first = off / pb, last = (off + r.bytes - 1) / pb;
    const Timings& tm = cfg.timings;
    uint64_t t = issue + tm.controller_ns, done = t;
    uint64_t host_ns = xfer_ns(r.bytes, tm.host_mb_s);
    if (r.write) {
      uint64_t arrived = host.reserve(t, host_ns, now);  // data comes over the link first
      for (uint64_t p = first; p <= last; ++p) done = std::max(done, write_page(p, arrived));
      st.host_pages_written += last - first + 1;
      ++st.writes;
      st.bytes_written += r.bytes;
    } else {
      for (uint64_t p = first; p <= last; ++p) done = std::max(done, read_page(p, t));
      done = host.reserve(done, host_ns, now);
      ++st.reads;
      st.bytes_read += r.bytes;
    }
    q.push_back(done);
    std::push_heap(q.begin(), q.end(), std::greater<>());
    uint64_t lat = done - issue;
    lat_all.add(lat);
    (r.write ? lat_write : lat_read).add(lat);
    if (st.requests++ == 0) st.first_arrival_ns = r.arrival_ns;
    st.first_arrival_ns = std::min(st.first_arrival_ns, r.arrival_ns);
    st.last_completion_ns = std::max(st.last_completion_ns, done);
    return done;
  }

  uint64_t flush(uint64_t at) {
    now = at;
    uint64_t end = at, program_end;
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot& s = slots[(ring_head + i) % slots.size()];
      if (s.lpn == detail::Ftl::kUnmapped || !s.dirty) continue;
      program_page(s.lpn, at, program_end);
      s.dirty = false;
      end = std::max(end, program_end);
    }
    return end;
  }

  Stats stats() const {
    Stats s = st;
    s.all = lat_all.summary();
    s.read = lat_read.summary();
    s.write = lat_write.summary();
    s.flash_pages_programmed = ftl.programs() - baseline_programs;
    s.gc_pages_moved = ftl.gc_pages_moved() - baseline_moved;
    s.gc_runs = ftl.gc_runs() - baseline_runs;
    s.erases = ftl.erases() - baseline_erases;
    s.waf = s.host_pages_written ? static_cast<double>(s.flash_pages_programmed) / s.host_pages_written : 0.0;
    double span_s = static_cast<double>(s.last_completion_ns - s.first_arrival_ns) * 1e-9;
    if (span_s > 0) {
      s.iops = static_cast<double>(s.requests) / span_s;
      s.read_mb_s = static_cast<double>(s.bytes_read) / span_s * 1e-6;
      s.write_mb_s = static_cast<double>(s.bytes_written) / span_s * 1e-6;
    }
    return s;
  }
};

Ssd::Ssd(const SsdConfig& cfg) : impl_(std::make_unique<Impl>(cfg)) {}
Ssd::~Ssd() = default;
Ssd::Ssd(Ssd&&) noexcept = default;
Ssd& Ssd::operator=(Ssd&&) noexcept = default;
uint64_t Ssd::submit(const Request& r) { return impl_->submit(r); }
uint64_t Ssd::last_issue_ns() const { return impl_->last_issue; }
uint64_t Ssd::flush(uint64_t now_ns) { return impl_->flush(now_ns); }
Stats Ssd::stats() const { return impl_->stats(); }
const SsdConfig& Ssd::config() const { return impl_->cfg; }
uint64_t Ssd::logical_bytes() const { return impl_->ftl.logical_pages() * impl_->cfg.geometry.page_bytes; }
uint64_t Ssd::physical_page(uint64_t lpn) const {
  uint32_t p = impl_->ftl.lookup(lpn);
  return p == detail::Ftl::kUnmapped ? UINT64_MAX : p;
}
uint32_t Ssd::valid_pages(uint64_t block) const { return impl_->ftl.valid_pages(block); }

}  // namespace gpuio::sim
