// BaM-style device arrays (docs/decisions/0005): the page-cache algorithm, written once for the host and the GPU.
//
// An array of n elements (elem_bytes each) lives on a store from block `base_block` on, packed back to back.
// It is cut into pages of page_bytes (a power of two, 1..16 blocks). A set-associative cache holds
// sets x ways page slots; page p may only live in set p % sets, and within a set the victim is chosen by
// CLOCK (an empty way first; else the hand sweeps, clearing reference bits, to the first way whose bit is 0).
//
// Accesses are served in "warp rounds" (the GPU's unit, which the host implementation replays in the same
// order): the accesses of a group of up to 32 lanes are grouped by page; in each round every page whose set
// is not taken by another page of the round (GPU: not locked by another warp either) is looked up; hits are
// served at once, misses pick a victim, dirty victims are written back and the missing pages read in ONE
// coalesced engine request per round (per 16 block ids on the GPU: the ring's inline id limit), then served.
// Pages that found their set taken wait for the next round, and so do misses beyond the first round_pages
// (the warp's staging area; their victim search has already advanced CLOCK, on both implementations).
//
// Consistency rules (the same for both implementations):
//  - single writer: one DeviceArray object (GPU cache or host cache) owns the array's blocks while it is
//    open; nobody else writes them (a write by someone else is not seen while the page stays cached).
//  - writes go to the cached page and mark it dirty; they reach storage when the page is evicted
//    (write-back) or at flush(). flush() writes every dirty page and keeps them cached, clean.
//  - concurrent writes of one element within one kernel / one gather-scatter call: one of them wins.
//  - a failed read leaves the slot empty, serves zeros and records the errno (error()); the Python layer
//    raises it as OSError after the call. A failed write-back records the errno; the page is dropped.
//  - GPU: flush(), counters() and invalidate() only between kernels that use the array.
#pragma once
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpuio/engine.hpp"
#include "gpuio/gpu.hpp"

#if defined(__CUDACC__)
#define GPUIO_HD __host__ __device__ __forceinline__
#else
#define GPUIO_HD inline
#endif

namespace gpuio {

namespace array_limits {
constexpr uint32_t warp_lanes = 32;         // accesses grouped per round (a warp)
constexpr uint32_t ids_per_request = gpu_limits::request_inline_ids_max;  // GPU: no CUDA copy of ids
constexpr uint32_t page_blocks_max = ids_per_request;  // a page's block ids fit one request
constexpr uint32_t counter_shards = 64;    // GPU counters are striped over this many cache lines
constexpr uint32_t counter_words = 8;      // per shard (one 64-byte line)
}  // namespace array_limits

// Indices into a counter shard (and ArrayCounters' order).
enum ArrayCounter : uint32_t { ac_hits = 0, ac_misses, ac_page_reads, ac_page_writes, ac_evictions, ac_requests };

struct ArrayCounters {
  uint64_t hits = 0;        // element accesses whose page was cached
  uint64_t misses = 0;      // element accesses whose page had to be read
  uint64_t page_reads = 0;  // pages read from storage
  uint64_t page_writes = 0; // dirty pages written back (eviction or flush)
  uint64_t evictions = 0;   // valid pages replaced
  uint64_t requests = 0;    // I/O requests: host, one engine batch per round; GPU, one ring request per 16 ids
};

// DeviceArray's defaults (gpuio.DeviceArray reads them through _core.array_defaults()).
namespace array_defaults {
constexpr uint64_t cache_bytes = 64ull << 20;  // page-cache capacity (rounded down to whole sets of pages)
constexpr uint32_t ways = 8;                   // associativity (capped by the number of pages the cache holds)
constexpr uint32_t staging_groups = 256;       // GPU: host-mapped staging areas, one per warp filling at once
constexpr uint32_t round_bytes = 128u << 10;   // a warp fills at most this many bytes of pages per round (its
                                               // staging area; pinned staging = staging_groups x round_bytes)
}  // namespace array_defaults

struct CacheGeometry {
  uint64_t n_elems = 0;
  uint32_t elem_bytes = 4;
  uint32_t page_bytes = 4096;
  uint32_t block_bytes = 4096;
  int64_t base_block = 0;  // store block holding element 0
  uint32_t sets = 1;
  uint32_t ways = array_defaults::ways;
  uint32_t round_pages = array_defaults::round_bytes / 4096;  // pages one warp fills per round (its staging
                                                               // area); more misses wait a round

  GPUIO_HD uint64_t elems_per_page() const { return page_bytes / elem_bytes; }
  GPUIO_HD uint64_t pages() const { return (n_elems + elems_per_page() - 1) / elems_per_page(); }
  GPUIO_HD uint32_t blocks_per_page() const { return page_bytes / block_bytes; }
  GPUIO_HD uint64_t slots() const { return uint64_t{sets} * ways; }
  GPUIO_HD uint32_t set_of(uint64_t page) const { return static_cast<uint32_t>(page % sets); }
  GPUIO_HD int64_t first_block(uint64_t page) const {
    return base_block + static_cast<int64_t>(page) * blocks_per_page();
  }

  // Throws std::invalid_argument naming the bad value; store_blocks: blocks the store has.
  void validate(uint64_t store_blocks) const {
    auto bad = [](const std::string& m) { throw std::invalid_argument(m); };
    auto pow2 = [](uint64_t v) { return v && !(v & (v - 1)); };
    if (!(elem_bytes == 1 || elem_bytes == 2 || elem_bytes == 4 || elem_bytes == 8))
      bad("elem_bytes=" + std::to_string(elem_bytes) + " must be 1, 2, 4 or 8");
    if (!pow2(block_bytes) || block_bytes < 512) bad("block_bytes=" + std::to_string(block_bytes) + " must be a power of two >= 512");
    if (!pow2(page_bytes) || page_bytes < block_bytes || page_bytes / block_bytes > array_limits::page_blocks_max)
      bad("page_bytes=" + std::to_string(page_bytes) + " must be a power of two of 1.." +
          std::to_string(array_limits::page_blocks_max) + " blocks of " + std::to_string(block_bytes) + " bytes");
    if (sets == 0 || ways == 0) bad("cache needs sets >= 1 and ways >= 1, got sets=" + std::to_string(sets) +
                                    " ways=" + std::to_string(ways));
    if (round_pages < 1 || round_pages > array_limits::warp_lanes)
      bad("round_pages=" + std::to_string(round_pages) + " must lie in [1, 32]");
    if (ways > 255) bad("ways=" + std::to_string(ways) + " must be <= 255");
    if (base_block < 0) bad("base_block=" + std::to_string(base_block) + " must be >= 0");
    const uint64_t end = static_cast<uint64_t>(base_block) + pages() * blocks_per_page();
    if (end > store_blocks)
      bad("array of " + std::to_string(n_elems) + " elements in pages of " + std::to_string(page_bytes) +
          " bytes ends at block " + std::to_string(end) + " but the store has " + std::to_string(store_blocks) +
          " blocks (pad the file to whole pages or use page_bytes=block size)");
  }
};

// Cache policy on one set, single-threaded (the caller owns the set). P: int64_t* on the host, a volatile
// pointer on the GPU (tags written by other SMs must not come from a stale L1 line).
template <class TagPtr>
GPUIO_HD int32_t array_find_way(TagPtr tags, uint32_t ways, int64_t page) {
  for (uint32_t w = 0; w < ways; ++w)
    if (tags[w] == page) return static_cast<int32_t>(w);
  return -1;
}

template <class TagPtr, class RefPtr, class HandPtr>
GPUIO_HD uint32_t array_clock_victim(TagPtr tags, RefPtr ref, uint32_t ways, HandPtr hand) {
  for (uint32_t w = 0; w < ways; ++w)
    if (tags[w] < 0) return w;
  uint32_t h = *hand % ways;
  for (;;) {  // at most two sweeps: the first clears every bit it passes
    if (ref[h] == 0) {
      *hand = (h + 1) % ways;
      return h;
    }
    ref[h] = 0;
    h = (h + 1) % ways;
  }
}

// What the GPU kernels get (by value). Plain pointers: the host-side owner (GpuArrayCache) allocates them.
struct ArrayRef {
  CacheGeometry g;
  uint8_t* pages = nullptr;          // device: slots x page_bytes, slot = set * ways + way
  int64_t* tags = nullptr;           // device: page held by each slot, -1 empty
  uint8_t* ref = nullptr;            // device: CLOCK reference bit per slot
  uint8_t* dirty = nullptr;          // device: slot written since read / last flush
  uint32_t* hands = nullptr;         // device: CLOCK hand per set
  uint32_t* locks = nullptr;         // device: per set, 0 free / 1 taken
  uint8_t* staging_dev = nullptr;    // host-mapped pinned: groups x round_pages pages (device address)
  uint8_t* staging_host = nullptr;   // the same memory, host address (the engine's destination/source)
  int64_t* group_ids = nullptr;      // device: groups x round_pages x blocks_per_page block ids
  uint32_t* group_locks = nullptr;   // device: per staging group
  uint32_t groups = 0;
  unsigned long long* counters = nullptr;  // device: counter_shards x counter_words
  int32_t* error = nullptr;          // device: first errno seen, 0 none
  QueueRef* queues = nullptr;        // device: queue_count QueueRefs of the engine's GPU runtime
  uint32_t queue_count = 0;
};

// The CPU implementation: the same geometry, policy and round structure, pages in host memory, misses read
// with one engine batch per round. Single-threaded (one caller at a time).
class HostArrayCache {
 public:
  HostArrayCache(Engine& engine, const CacheGeometry& g) : eng_(engine), g_(g) {
    g_.validate(engine.total_blocks());
    if (g_.block_bytes != engine.options().block_size)
      throw std::invalid_argument("block_bytes=" + std::to_string(g_.block_bytes) + " differs from the engine's " +
                                  std::to_string(engine.options().block_size));
    pages_.assign(g_.slots() * g_.page_bytes, 0);
    tags_.assign(g_.slots(), -1);
    ref_.assign(g_.slots(), 0);
    dirty_.assign(g_.slots(), 0);
    hands_.assign(g_.sets, 0);
  }

  const CacheGeometry& geometry() const { return g_; }
  ArrayCounters counters() const { return c_; }
  void reset_counters() { c_ = {}; }

  // out[j] = a[idx[j]] (elem_bytes each). Throws std::out_of_range naming the first bad index.
  void gather(const int64_t* idx, size_t n, void* out) { run(idx, n, static_cast<uint8_t*>(out), nullptr); }
  // a[idx[j]] = vals[j]; with duplicates one of them wins (here: the last).
  void scatter(const int64_t* idx, size_t n, const void* vals) {
    run(idx, n, nullptr, static_cast<const uint8_t*>(vals));
  }

  // Writes every dirty page (one engine batch); pages stay cached, clean.
  void flush() {
    std::vector<uint64_t> slots;
    for (uint64_t s = 0; s < g_.slots(); ++s)
      if (dirty_[s] && tags_[s] >= 0) slots.push_back(s);
    write_back(slots);
    for (uint64_t s : slots) dirty_[s] = 0;
  }
  // Drops every page (call flush() first to keep writes).
  void invalidate() {
    std::fill(tags_.begin(), tags_.end(), -1);
    std::fill(dirty_.begin(), dirty_.end(), 0);
    std::fill(ref_.begin(), ref_.end(), 0);
    std::fill(hands_.begin(), hands_.end(), 0);
  }
  // Page held by each slot (-1 empty): for tests comparing against the GPU's placement.
  const std::vector<int64_t>& tags() const { return tags_; }

 private:
  uint8_t* slot_data(uint64_t slot) { return pages_.data() + slot * g_.page_bytes; }

  void write_back(const std::vector<uint64_t>& slots) {
    if (slots.empty()) return;
    const uint32_t bpp = g_.blocks_per_page();
    std::vector<int64_t> ids;
    std::vector<uint8_t> buf(slots.size() * g_.page_bytes);
    for (size_t k = 0; k < slots.size(); ++k) {
      for (uint32_t b = 0; b < bpp; ++b) ids.push_back(g_.first_block(tags_[slots[k]]) + b);
      std::memcpy(buf.data() + k * g_.page_bytes, slot_data(slots[k]), g_.page_bytes);
    }
    eng_.write(ids.data(), ids.size(), buf.data());
    c_.page_writes += slots.size();
    c_.requests += 1;
  }

  void run(const int64_t* idx, size_t n, uint8_t* out, const uint8_t* vals) {
    for (size_t j = 0; j < n; ++j)
      if (idx[j] < 0 || static_cast<uint64_t>(idx[j]) >= g_.n_elems)
        throw std::out_of_range("index " + std::to_string(idx[j]) + " at position " + std::to_string(j) +
                                " is outside the array of " + std::to_string(g_.n_elems) + " elements");
    for (size_t lo = 0; lo < n; lo += array_limits::warp_lanes)
      warp(idx + lo, std::min<size_t>(array_limits::warp_lanes, n - lo), out ? out + lo * g_.elem_bytes : nullptr,
           vals ? vals + lo * g_.elem_bytes : nullptr);
  }

  // One warp's accesses (lanes 0..m-1), in the GPU's rounds.
  void warp(const int64_t* idx, size_t m, uint8_t* out, const uint8_t* vals) {
    const uint64_t epp = g_.elems_per_page();
    std::vector<uint64_t> pending;  // distinct pages, in order of their first (leader) lane
    for (size_t l = 0; l < m; ++l) {
      const uint64_t p = static_cast<uint64_t>(idx[l]) / epp;
      if (std::find(pending.begin(), pending.end(), p) == pending.end()) pending.push_back(p);
    }
    while (!pending.empty()) {
      std::vector<uint32_t> taken;  // sets locked this round
      std::vector<uint64_t> served, later, fill_pages, fill_slots, wb_slots;
      for (uint64_t p : pending) {
        const uint32_t set = g_.set_of(p);
        if (std::find(taken.begin(), taken.end(), set) != taken.end()) {
          later.push_back(p);
          continue;
        }
        taken.push_back(set);
        const uint64_t base = uint64_t{set} * g_.ways;
        const int32_t w = array_find_way(tags_.data() + base, g_.ways, static_cast<int64_t>(p));
        if (w >= 0) {
          serve(p, base + w, idx, m, out, vals, /*hit*/ true);
          continue;
        }
        const uint64_t slot = base + array_clock_victim(tags_.data() + base, ref_.data() + base, g_.ways, &hands_[set]);
        if (fill_pages.size() == g_.round_pages) {  // the warp's staging is full: this page waits a round
          later.push_back(p);
          continue;
        }
        if (tags_[slot] >= 0) {
          c_.evictions += 1;
          if (dirty_[slot]) wb_slots.push_back(slot);
        }
        fill_pages.push_back(p);
        fill_slots.push_back(slot);
      }
      write_back(wb_slots);
      if (!fill_pages.empty()) {
        const uint32_t bpp = g_.blocks_per_page();
        std::vector<int64_t> ids;
        for (uint64_t p : fill_pages)
          for (uint32_t b = 0; b < bpp; ++b) ids.push_back(g_.first_block(p) + b);
        std::vector<uint8_t> buf(fill_pages.size() * g_.page_bytes);
        c_.requests += 1;
        eng_.read(ids.data(), ids.size(), buf.data());  // throws IoError (OSError in Python) on failure
        for (size_t k = 0; k < fill_pages.size(); ++k) {
          std::memcpy(slot_data(fill_slots[k]), buf.data() + k * g_.page_bytes, g_.page_bytes);
          tags_[fill_slots[k]] = static_cast<int64_t>(fill_pages[k]);
          dirty_[fill_slots[k]] = 0;
          c_.page_reads += 1;
          serve(fill_pages[k], fill_slots[k], idx, m, out, vals, /*hit*/ false);
        }
      }
      pending.swap(later);
    }
  }

  // The lanes of page p read (or write) their element in slot; reference bit set, as the GPU leader does.
  void serve(uint64_t p, uint64_t slot, const int64_t* idx, size_t m, uint8_t* out, const uint8_t* vals, bool hit) {
    const uint64_t epp = g_.elems_per_page();
    uint64_t lanes = 0;
    for (size_t l = 0; l < m; ++l) {
      if (static_cast<uint64_t>(idx[l]) / epp != p) continue;
      uint8_t* e = slot_data(slot) + (static_cast<uint64_t>(idx[l]) % epp) * g_.elem_bytes;
      if (vals) std::memcpy(e, vals + l * g_.elem_bytes, g_.elem_bytes);
      else std::memcpy(out + l * g_.elem_bytes, e, g_.elem_bytes);
      ++lanes;
    }
    ref_[slot] = 1;
    if (vals) dirty_[slot] = 1;
    (hit ? c_.hits : c_.misses) += lanes;
  }

  Engine& eng_;
  CacheGeometry g_;
  std::vector<uint8_t> pages_;
  std::vector<int64_t> tags_;
  std::vector<uint8_t> ref_, dirty_;
  std::vector<uint32_t> hands_;
  ArrayCounters c_;
};

#if defined(GPUIO_HAVE_CUDA) || defined(__CUDACC__)
namespace detail {
class PinnedBlock;
}
// The GPU implementation's host-side owner (cpp/src/gpu/array.cu): allocates the cache in GPU memory and the
// staging in host-mapped pinned memory (an owned block of the process's one pinned pool), launches the gather/scatter kernels, flushes. The engine and runtime
// must outlive it. Kernels written by users take ref() by value and use gpuio::DeviceArray<T> (array.cuh).
class GpuArrayCache {
 public:
  // queues: device-API queues of the engine's GPU runtime (GpuRuntime::queue(i)); warp w uses w % size.
  GpuArrayCache(Engine& engine, const std::vector<QueueRef>& queues, const CacheGeometry& g, uint32_t staging_groups);
  ~GpuArrayCache();
  GpuArrayCache(const GpuArrayCache&) = delete;
  GpuArrayCache& operator=(const GpuArrayCache&) = delete;

  const ArrayRef& ref() const { return ref_; }
  // Kernels on `stream` (a cudaStream_t): out[j] = a[idx[j]] / a[idx[j]] = vals[j]; idx, out, vals in GPU
  // memory. Returns at once; the stream orders them.
  void gather(const int64_t* idx, uint64_t n, void* out, void* stream);
  void scatter(const int64_t* idx, uint64_t n, const void* vals, void* stream);
  void flush();       // every dirty page written back (synchronises the device first)
  void invalidate();  // every page dropped
  ArrayCounters counters() const;
  void reset_counters();
  int error() const;  // first errno a kernel recorded (0: none); clear_error() resets it
  void clear_error();
  std::vector<int64_t> tags() const;

 private:
  void release();
  Engine& eng_;
  ArrayRef ref_{};
  std::unique_ptr<detail::PinnedBlock> staging_;
};
#endif

}  // namespace gpuio
