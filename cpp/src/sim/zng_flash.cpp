#include "sim/zng_flash.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace gpuio::zng::detail {

Flash::Flash(const ZngConfig& c, ZngResult& r) : c_(c), r_(r) {
  if (c.channels == 0 || c.dies_per_channel == 0 || c.planes_per_die == 0 || c.link_mb_s == 0)
    throw std::invalid_argument("ZnG flash: channels, dies, planes and link_mb_s must be > 0");
  if (c.page_bytes % c.l2_line_bytes || c.page_bytes / c.l2_line_bytes > 64)
    throw std::invalid_argument("ZnG flash: page_bytes=" + std::to_string(c.page_bytes) +
                                " must be a multiple of the L2 line and at most 64 lines");
  if (c.register_write_buffer && c.registers_per_plane == 0)
    throw std::invalid_argument("ZnG flash: register write buffer needs registers_per_plane > 0");
  planes_ = c.channels * c.dies_per_channel * c.planes_per_die;
  plane_free_.assign(planes_, 0);
  link_free_.assign(c.flash_network ? planes_ : c.channels, 0);
  read_reg_page_.assign(planes_, 0);
  if (c.register_write_buffer) regs_.resize(uint64_t{planes_} * c.registers_per_plane);
  recent_.assign(kRecent, 0);
  log_used_.assign(planes_, 0);
  log_distinct_.assign(planes_, 0);
  log_gen_.assign(planes_, 1);
}

uint64_t Flash::transfer(uint32_t plane, uint64_t bytes, uint64_t ready) {
  uint64_t& lf = link_free_[link_of(plane)];
  uint64_t start = std::max(ready, lf);
  lf = start + c_.flash_cmd_ns + (bytes * 1000 + c_.link_mb_s - 1) / c_.link_mb_s;
  return lf;
}

uint64_t Flash::read(uint64_t addr, uint32_t bytes, uint64_t t) {
  uint64_t done = t, end = addr + bytes;
  for (uint64_t at = addr; at < end;) {
    uint64_t page = page_of(at), page_end = (page + 1) * c_.page_bytes;
    uint64_t n = std::min(end, page_end) - at;
    uint32_t p = plane_of(page);
    uint64_t ready = t;
    Reg* g = find_register(page);
    uint64_t first = (at % c_.page_bytes) / c_.l2_line_bytes, last = ((at + n - 1) % c_.page_bytes) / c_.l2_line_bytes;
    uint64_t need = ((last == 63 ? ~0ull : (1ull << (last + 1)) - 1) >> first) << first;
    if (read_reg_page_[p] == page + 1 || (g && (g->dirty_lines & need) == need)) {
      ++r_.register_read_hits;
    } else {
      uint64_t start = std::max(t, plane_free_[p]);
      ready = plane_free_[p] = start + c_.read_ns;
      read_reg_page_[p] = page + 1;
      ++r_.flash_reads;
    }
    done = std::max(done, transfer(p, n, ready));
    r_.flash_read_bytes += n;
    at += n;
  }
  return done;
}

uint64_t Flash::program_page(uint64_t page, bool full, uint64_t t) {
  uint32_t p = plane_of(page);
  uint64_t start = std::max(t, plane_free_[p]);
  if (!full) start += c_.read_ns;  // read-modify-write: the rest of the page comes from the array
  plane_free_[p] = start + c_.program_ns;
  if (read_reg_page_[p] != page + 1) read_reg_page_[p] = 0;
  ++r_.flash_programs;
  log_append(p, page, plane_free_[p]);
  return plane_free_[p];
}

void Flash::log_append(uint32_t p, uint64_t page, uint64_t t) {
  uint32_t& gen = page_gen_[page];
  if (gen != log_gen_[p]) gen = log_gen_[p], ++log_distinct_[p];
  if (++log_used_[p] < c_.log_blocks_per_plane * c_.pages_per_block) return;
  // The log is full: the helper merges it into data blocks (copy the live pages, erase the log blocks).
  ++r_.gc_runs;
  r_.gc_pages_moved += log_distinct_[p];
  plane_free_[p] = std::max(t, plane_free_[p]) + uint64_t{log_distinct_[p]} * (c_.read_ns + c_.program_ns) +
                   uint64_t{c_.log_blocks_per_plane} * c_.erase_ns;
  log_used_[p] = log_distinct_[p] = 0;
  ++log_gen_[p];
}

Flash::Reg* Flash::find_register(uint64_t page) {
  if (regs_.empty()) return nullptr;
  uint32_t p = plane_of(page), R = c_.registers_per_plane;
  if (!c_.grouped_registers) {
    for (uint32_t i = 0; i < R; ++i)
      if (Reg& g = regs_[uint64_t{p} * R + i]; g.valid && g.page == page) return &g;
    return nullptr;
  }
  // The die's planes: same channel and die, every plane index k (see plane layout in zng_flash.hpp).
  uint32_t ch = p % c_.channels, q = p / c_.channels, die = q / c_.planes_per_die;
  for (uint32_t k = 0; k < c_.planes_per_die; ++k) {
    uint32_t pl = ch + c_.channels * (die * c_.planes_per_die + k);
    for (uint32_t i = 0; i < R; ++i)
      if (Reg& g = regs_[uint64_t{pl} * R + i]; g.valid && g.page == page) return &g;
  }
  return nullptr;
}

Flash::Reg& Flash::take_register(uint64_t page, uint64_t t) {
  uint32_t p = plane_of(page), R = c_.registers_per_plane;
  uint32_t ch = p % c_.channels, die = (p / c_.channels) / c_.planes_per_die;
  uint32_t group = c_.grouped_registers ? c_.planes_per_die : 1;
  Reg* victim = nullptr;
  for (uint32_t k = 0; k < group; ++k) {
    uint32_t pl = c_.grouped_registers ? ch + c_.channels * (die * c_.planes_per_die + k) : p;
    for (uint32_t i = 0; i < R; ++i) {
      Reg& g = regs_[uint64_t{pl} * R + i];
      if (!g.valid) {
        victim = &g;
        break;
      }
      if (!victim || (victim->valid && g.stamp < victim->stamp)) victim = &g;
    }
    if (victim && !victim->valid) break;
  }
  if (victim->valid) {
    uint64_t all = c_.page_bytes / c_.l2_line_bytes == 64 ? ~0ull : (1ull << (c_.page_bytes / c_.l2_line_bytes)) - 1;
    program_page(victim->page, victim->dirty_lines == all, t);
    ++r_.register_evictions;
    recent_[victim->page % kRecent] = victim->page + 1;
  }
  // Thrashing check: allocations for pages that were just evicted mean the registers are too few.
  if (recently_evicted(page)) ++r_.thrash_events, ++epoch_thrash_;
  if (++epoch_allocs_ == 256) {
    thrashing_ = c_.pin_on_thrash && static_cast<double>(epoch_thrash_) / epoch_allocs_ > c_.thrash_pin_above;
    epoch_allocs_ = epoch_thrash_ = 0;
  }
  *victim = Reg{page, ++clock_, 0, true};
  return *victim;
}

uint64_t Flash::write_back(uint64_t line_addr, uint32_t line_bytes, uint64_t t) {
  r_.written_back_bytes += line_bytes;
  uint64_t page = page_of(line_addr);
  uint32_t p = plane_of(page);
  uint64_t arrived = transfer(p, line_bytes, t);
  if (regs_.empty()) return program_page(page, line_bytes >= c_.page_bytes, arrived);
  Reg* g = find_register(page);
  if (g) {
    ++r_.register_write_hits;
    g->stamp = ++clock_;
  } else {
    g = &take_register(page, arrived);
  }
  g->dirty_lines |= 1ull << ((line_addr % c_.page_bytes) / c_.l2_line_bytes);
  return arrived;
}

void Flash::flush(uint64_t t) {
  uint64_t all = c_.page_bytes / c_.l2_line_bytes == 64 ? ~0ull : (1ull << (c_.page_bytes / c_.l2_line_bytes)) - 1;
  for (Reg& g : regs_)
    if (g.valid && g.dirty_lines) program_page(g.page, g.dirty_lines == all, t), g.dirty_lines = 0;
}

}  // namespace gpuio::zng::detail
