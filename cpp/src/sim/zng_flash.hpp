// The flash side of the ZnG platforms: planes (array busy time), links (a bus per channel, or with the
// flash network a link per plane), a read register per plane, flash registers used as a write buffer
// (per plane, or grouped across the planes of a die: NiF), the thrashing detector, and the zero-overhead
// FTL's log blocks with helper-run merges (GC). Pages are striped over planes (page % planes), which is
// what the read-only block map of super-blocks gives. Single thread; O(1) per page except register
// search (registers_per_plane x planes_per_die).
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "gpuio/zng.hpp"

namespace gpuio::zng::detail {

class Flash {
 public:
  Flash(const ZngConfig& c, ZngResult& r);
  // Bytes [addr, addr+bytes) into the GPU side, starting at t; returns when the last byte arrived.
  uint64_t read(uint64_t addr, uint32_t bytes, uint64_t t);
  // A dirty L2 line handed down at t. Never blocks the caller (returns when the flash took the line).
  uint64_t write_back(uint64_t line_addr, uint32_t line_bytes, uint64_t t);
  // Program a whole page at t (full: no read-modify-write). Returns the program's end.
  uint64_t program_page(uint64_t page, bool full, uint64_t t);
  void flush(uint64_t t);                 // program every dirty register
  bool thrashing() const { return thrashing_; }
  bool recently_evicted(uint64_t page) const { return recent_[page % kRecent] == page + 1; }
  uint64_t page_of(uint64_t addr) const { return addr / c_.page_bytes; }

 private:
  struct Reg {
    uint64_t page = 0, stamp = 0, dirty_lines = 0;  // dirty_lines: bit per 128 B line (pages <= 8 KiB)
    bool valid = false;
  };
  static constexpr uint32_t kRecent = 1024;
  uint32_t plane_of(uint64_t page) const { return static_cast<uint32_t>(page % planes_); }
  uint32_t link_of(uint32_t plane) const { return c_.flash_network ? plane : plane % c_.channels; }
  uint64_t transfer(uint32_t plane, uint64_t bytes, uint64_t ready);
  Reg* find_register(uint64_t page);
  Reg& take_register(uint64_t page, uint64_t t);
  void log_append(uint32_t plane, uint64_t page, uint64_t t);

  const ZngConfig& c_;
  ZngResult& r_;
  uint32_t planes_;
  std::vector<uint64_t> plane_free_, link_free_, read_reg_page_;  // read_reg_page_: page + 1, 0 = empty
  std::vector<Reg> regs_;  // registers_per_plane per plane, plane-major
  uint64_t clock_ = 0;
  std::vector<uint64_t> recent_;  // direct-mapped set of recently evicted register pages (page + 1)
  uint64_t epoch_allocs_ = 0, epoch_thrash_ = 0;
  bool thrashing_ = false;
  // zero-overhead FTL: per plane, pages in its log blocks and which distinct pages they hold
  std::vector<uint32_t> log_used_, log_distinct_, log_gen_;
  std::unordered_map<uint64_t, uint32_t> page_gen_;  // page -> log generation it was last logged in (+1)
};

}  // namespace gpuio::zng::detail
