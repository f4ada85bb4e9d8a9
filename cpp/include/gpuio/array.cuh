// BaM-style device arrays, device side: kernels read a[i] (and write it) from an array that lives on storage,
// through a GPU page cache; misses go to the CPU-managed engine (no GPU-side NVMe queues, no SM polls storage).
//
//   __global__ void k(gpuio::ArrayRef ref, ...) {
//     gpuio::DeviceArray<int32_t> a(ref);
//     int32_t v = a[i];          // any lanes of a warp, converged at the call
//     a.write(j, v + 1);         // written back to storage on eviction or GpuArrayCache::flush()
//   }
//
// The algorithm (geometry, set mapping, CLOCK victim, rounds, consistency rules) is in array_cache.hpp, shared
// with the CPU implementation HostArrayCache. How a warp runs one access:
//  1. lanes are grouped by page (__match_any_sync); the lowest lane of a group leads it;
//  2. each round, one pending leader per set (the lowest lane) tries its set's lock once, as a reader (readers
//     share a set: hits run in parallel); a miss upgrades to exclusive when it is the set's only reader, else
//     it claims the set (pending: new readers back off) and takes it exclusively in a later round. Nothing is
//     waited for while a lock is held except this warp's own I/O, so warps never wait on each other in a cycle;
//  3. the leaders that missed pick victims (the first round_pages of them fill now, the others unlock and
//     retry), and the warp together: takes a staging group (host-mapped pinned memory, round_pages pages), copies dirty victims there and writes them back, then reads every missing page in one
//     coalesced request (one per 16 block ids: the ring's inline limit, so the control plane makes no CUDA
//     call) — the engine moves data with the CPU into host memory (MemKind::host), so a kernel waiting here
//     never depends on a CUDA API call of another host thread (which a context-synchronising call such as
//     cudaFree would block: docs/decisions/0001). The warp then copies the pages from mapped memory into the cache;
//  4. the group's lanes read (or write) their element while the leader holds the lock, then it unlocks.
// Loads of tags and page data bypass L1 (volatile / ld.cg): other SMs write them. Requires sm_70+
// (independent thread scheduling: a warp spinning on a try-lock does not starve the holder).
#pragma once
#include <cuda/atomic>

#include "gpuio/array_cache.hpp"
#include "gpuio/device.cuh"

namespace gpuio {

namespace array_detail {

__device__ __forceinline__ uint32_t lane_id() {
  uint32_t l;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));
  return l;
}

__device__ __forceinline__ uint64_t global_warp() {
  const uint64_t block = blockIdx.x + uint64_t{gridDim.x} * (blockIdx.y + uint64_t{gridDim.y} * blockIdx.z);
  const uint32_t t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const uint32_t per_block = (blockDim.x * blockDim.y * blockDim.z + 31) / 32;
  return block * per_block + t / 32;
}

__device__ __forceinline__ bool try_lock(uint32_t* w) {
  if (atomicCAS(w, 0u, 1u) != 0u) return false;
  __threadfence();  // acquire: what the previous holder wrote is visible to the loads below (L2)
  return true;
}

__device__ __forceinline__ void unlock(uint32_t* w) {
  __threadfence();  // release
  atomicExch(w, 0u);
}

template <class T>
__device__ __forceinline__ T load_cg(const T* p) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "element of 1, 2, 4 or 8 bytes");
  T v;
  if constexpr (sizeof(T) == 8) {
    unsigned long long r = __ldcg(reinterpret_cast<const unsigned long long*>(p));
    memcpy(&v, &r, 8);
  } else if constexpr (sizeof(T) == 4) {
    unsigned int r = __ldcg(reinterpret_cast<const unsigned int*>(p));
    memcpy(&v, &r, 4);
  } else if constexpr (sizeof(T) == 2) {
    unsigned short r = __ldcg(reinterpret_cast<const unsigned short*>(p));
    memcpy(&v, &r, 2);
  } else {
    unsigned char r = *reinterpret_cast<const volatile unsigned char*>(p);
    memcpy(&v, &r, 1);
  }
  return v;
}

// The lanes of `mask` copy `bytes` (a multiple of 16) together. from_host: src is host-mapped memory the CPU
// just wrote (ld.cv: never a cached copy); else GPU memory other SMs wrote (ld.cg: not L1).
__device__ __forceinline__ void warp_copy(unsigned mask, void* dst, const void* src, uint32_t bytes, bool from_host) {
  const uint32_t rank = __popc(mask & ((1u << lane_id()) - 1u));
  const uint32_t step = __popc(mask);
  uint4* d = static_cast<uint4*>(dst);
  const uint4* s = static_cast<const uint4*>(src);
  for (uint32_t k = rank; k < bytes / 16; k += step) d[k] = from_host ? __ldcv(s + k) : __ldcg(s + k);
}

__device__ __forceinline__ void count(const ArrayRef& r, ArrayCounter c, unsigned long long v) {
  if (v == 0) return;
  const uint32_t shard = static_cast<uint32_t>(global_warp() % array_limits::counter_shards);
  atomicAdd(&r.counters[shard * array_limits::counter_words + c], v);
}

__device__ __forceinline__ void record_error(const ArrayRef& r, int err) {
  if (err != 0) atomicCAS(r.error, 0, err);
}

// One lane (the caller) publishes n block ids from ids[] (device memory, written by the warp) in requests of
// at most ids_per_request (whole pages each) and waits for them; returns 0 or an errno.
__device__ inline int issue(const ArrayRef& r, uint32_t op, const int64_t* ids, uint32_t n, uint8_t* host_mem) {
  const QueueRef q = r.queues[global_warp() % r.queue_count];
  const uint32_t before = detail::load_acquire_sys(&q.shared->failures);
  const uint32_t bpp = r.g.blocks_per_page();
  const uint32_t per = (array_limits::ids_per_request / bpp) * bpp;
  uint32_t last = 0;
  for (uint32_t off = 0; off < n; off += per) {
    const uint32_t m = n - off < per ? n - off : per;
    last = detail::publish(q, op, ids + off, m, host_mem + uint64_t{off} * r.g.block_bytes, /*host*/ 0, nullptr);
    count(r, ac_requests, 1);
  }
  return detail::wait_done(q, last, before);
}

// Warp-collective (every lane of mask): the leaders in `fill` (each holding its set's lock) get their page into
// slot `slot`; `victim`: the page the slot held (-1 none), `victim_dirty`: it must be written back first.
// Returns (in every lane) 0 or the errno of a failed read.
__device__ inline int fill_pages(const ArrayRef& r, unsigned mask, unsigned fill, bool mine, uint64_t page,
                                 uint64_t slot, int64_t victim, bool victim_dirty) {
  const uint32_t lane = lane_id();
  const uint32_t first = __ffs(mask) - 1;
  const uint32_t bpp = r.g.blocks_per_page();
  const uint32_t pb = r.g.page_bytes;
  // A staging group: round_pages pages of host-mapped memory and their block ids, owned by this warp meanwhile.
  uint32_t grp = 0;
  if (lane == first) {
    uint32_t g = static_cast<uint32_t>(global_warp() % r.groups), ns = 64;
    while (!try_lock(&r.group_locks[g])) {
      g = (g + 1) % r.groups;
      __nanosleep(ns);
      if (ns < 1024) ns *= 2;
    }
    grp = g;
  }
  grp = __shfl_sync(mask, grp, first);
  const uint32_t rp = r.g.round_pages;
  uint8_t* st_dev = r.staging_dev + uint64_t{grp} * rp * pb;
  uint8_t* st_host = r.staging_host + uint64_t{grp} * rp * pb;
  int64_t* ids = r.group_ids + uint64_t{grp} * rp * bpp;

  // Write-backs of dirty victims, one request group.
  const unsigned wb = __ballot_sync(mask, mine && victim_dirty);
  if (wb) {
    if (mine && victim_dirty) {
      const uint32_t k = __popc(wb & ((1u << lane) - 1u));
      for (uint32_t b = 0; b < bpp; ++b) ids[k * bpp + b] = r.g.first_block(victim) + b;
    }
    for (unsigned left = wb, k = 0; left; left &= left - 1, ++k) {
      const uint32_t src_lane = __ffs(left) - 1;
      const uint64_t s = __shfl_sync(mask, slot, src_lane);
      warp_copy(mask, st_dev + uint64_t{k} * pb, r.pages + s * pb, pb, false);
    }
    __threadfence_system();  // the page bytes and ids before the doorbell
    __syncwarp(mask);
    int err = 0;
    if (lane == first) err = issue(r, gpu_write, ids, __popc(wb) * bpp, st_host);
    err = __shfl_sync(mask, err, first);
    record_error(r, err);  // a failed write-back loses that page's writes: reported, not retried
    if (lane == first) count(r, ac_page_writes, __popc(wb));
  }
  // Reads of the missing pages, one request group.
  const uint32_t k = __popc(fill & ((1u << lane) - 1u));
  if (mine)
    for (uint32_t b = 0; b < bpp; ++b) ids[k * bpp + b] = r.g.first_block(page) + b;
  __threadfence();
  __syncwarp(mask);
  int err = 0;
  if (lane == first) {
    err = issue(r, gpu_read, ids, __popc(fill) * bpp, st_host);
    count(r, ac_page_reads, err ? 0 : __popc(fill));
  }
  err = __shfl_sync(mask, err, first);  // lane `first` acquired `done`; the barrier extends it to the warp
  __syncwarp(mask);
  for (unsigned left = fill, j = 0; left; left &= left - 1, ++j) {
    const uint32_t dst_lane = __ffs(left) - 1;
    const uint64_t s = __shfl_sync(mask, slot, dst_lane);
    if (err == 0) warp_copy(mask, r.pages + s * pb, st_dev + uint64_t{j} * pb, pb, true);
  }
  __threadfence();
  __syncwarp(mask);
  if (mine) {
    reinterpret_cast<volatile int64_t*>(r.tags)[slot] = err ? -1 : static_cast<int64_t>(page);
    r.dirty[slot] = 0;
    if (victim >= 0) count(r, ac_evictions, 1);
  }
  record_error(r, lane == first ? err : 0);
  if (lane == first) unlock(&r.group_locks[grp]);
  return err;
}

}  // namespace array_detail

template <class T>
class DeviceArray {
 public:
  __device__ explicit DeviceArray(const ArrayRef& r) : r_(r) {}
  __device__ uint64_t size() const { return r_.g.n_elems; }
  // Call with the lanes that need an element converged (any subset of a warp). i >= size(): reads 0 and
  // records ERANGE in the error word.
  __device__ T read(uint64_t i) const {
    T v{};
    access(i, false, v);
    return v;
  }
  __device__ T operator[](uint64_t i) const { return read(i); }
  __device__ void write(uint64_t i, T v) const { access(i, true, v); }

 private:
  // Set lock word: readers in the low bits, kSetPending (a filler waits for the readers to drain; new readers
  // back off), kSetExclusive (a filler owns the set).
  static constexpr uint32_t kSetExclusive = 1u << 31, kSetPending = 1u << 30;

  __device__ void access(uint64_t i, bool store, T& v) const {
    using namespace array_detail;
    const CacheGeometry& g = r_.g;
    const unsigned mask = __activemask();
    const uint32_t lane = lane_id();
    const uint64_t epp = g.elems_per_page();
    const bool in_range = i < g.n_elems;
    const uint64_t page = in_range ? i / epp : ~0ull;  // out-of-range lanes form their own group
    const unsigned peers = __match_any_sync(mask, page);
    const uint32_t leader = __ffs(peers) - 1;
    const bool lead = lane == leader;
    const uint32_t set = in_range ? g.set_of(page) : 0;
    const uint64_t base = uint64_t{set} * g.ways;
    uint32_t* word = &r_.locks[set];
    bool done = !in_range;
    bool own_pending = false;  // this leader set kSetPending on its set and will take it exclusively
    if (!in_range && lead) record_error(r_, ERANGE);
    while (__any_sync(mask, !done)) {
      // One leader per set per round, the lowest lane (or the one that owns the set's pending claim): the same
      // rule as HostArrayCache, so one warp's accesses place pages identically on host and GPU.
      const bool contender = lead && !done;
      const unsigned cmask = __ballot_sync(mask, contender);
      bool go = false;
      if (contender) {
        const unsigned same = __match_any_sync(cmask, set);
        const unsigned pend = same & __ballot_sync(cmask, own_pending);
        go = lane == static_cast<uint32_t>(__ffs(pend ? pend : same) - 1);
      }
      bool shared = false, excl = false, miss = false, dirty_victim = false;
      int64_t victim = -1;
      uint64_t slot = 0;
      if (go) {
        if (own_pending) {
          if (atomicCAS(word, kSetPending, kSetExclusive) == kSetPending) excl = true, own_pending = false;
        } else if (*reinterpret_cast<volatile uint32_t*>(word) & (kSetExclusive | kSetPending)) {
          // A filler owns or claimed the set: next round, without touching the word. Readers that added and
          // took back 1 here kept the count from ever reading 0 while a dozen warps polled one set, so the
          // claimant's CAS(kSetPending -> kSetExclusive) never succeeded (the H100 hung in the first scan).
        } else if (atomicAdd(word, 1u) & (kSetExclusive | kSetPending)) {
          atomicSub(word, 1u);  // claimed between the load and the add: next round
        } else {
          shared = true;
        }
      }
      if (shared || excl) {
        __threadfence();  // acquire: the last filler's tags and page bytes (L2) before the loads below
        volatile int64_t* tags = reinterpret_cast<volatile int64_t*>(r_.tags) + base;
        const int32_t w = array_find_way(tags, g.ways, static_cast<int64_t>(page));
        if (w >= 0) {
          slot = base + w;  // hit: served under the lock held (readers share it)
        } else {
          if (shared) {  // upgrade when this leader is the set's only reader; else claim it for later
            shared = false;
            if (atomicCAS(word, 1u, kSetExclusive) == 1u) {
              excl = true;
            } else {
              atomicSub(word, 1u);
              own_pending = !(atomicOr(word, kSetPending) & kSetPending);
            }
          }
          if (excl) {
            miss = true;
            volatile uint8_t* ref = reinterpret_cast<volatile uint8_t*>(r_.ref) + base;
            volatile uint32_t* hand = reinterpret_cast<volatile uint32_t*>(r_.hands) + set;
            slot = base + array_clock_victim(tags, ref, g.ways, hand);
            victim = tags[slot - base];
            dirty_victim = victim >= 0 && reinterpret_cast<volatile uint8_t*>(r_.dirty)[slot] != 0;
          }
        }
      }
      unsigned fill = __ballot_sync(mask, miss);
      while (static_cast<uint32_t>(__popc(fill)) > g.round_pages) fill &= ~(1u << (31 - __clz(fill)));
      if (miss && !(fill & (1u << lane))) {  // beyond this round's staging: retry next round
        miss = false;
        excl = false;
        __threadfence();
        atomicAnd(word, ~kSetExclusive);
      }
      const bool locked = shared || excl;
      int err = 0;
      if (fill) err = fill_pages(r_, mask, fill, miss, page, slot, victim, dirty_victim);
      err = __shfl_sync(mask, miss ? err : 0, leader);
      const bool served = __shfl_sync(mask, locked, leader);
      const uint64_t s = __shfl_sync(mask, slot, leader);
      if (served && !done) {
        T* e = reinterpret_cast<T*>(r_.pages + s * g.page_bytes) + (i % epp);
        if (err == 0) {
          if (store) *e = v;
          else v = load_cg(e);
        }
        done = true;
      }
      __syncwarp(mask);
      if (locked) {
        if (err == 0) {
          reinterpret_cast<volatile uint8_t*>(r_.ref)[slot] = 1;  // readers race to set 1: benign
          if (store) reinterpret_cast<volatile uint8_t*>(r_.dirty)[slot] = 1;
        }
        count(r_, miss ? ac_misses : ac_hits, __popc(peers));
        __threadfence();  // release: page bytes, tags, bits before the lock word changes
        if (excl) atomicAnd(word, ~kSetExclusive);
        else atomicSub(word, 1u);
      }
      if (!__any_sync(mask, locked) && __any_sync(mask, !done)) __nanosleep(200);  // every set busy: back off
    }
  }

  ArrayRef r_;
};

}  // namespace gpuio
