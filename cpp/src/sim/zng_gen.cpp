// Generators of GPU memory-access traces: graph analytics over CSR (BFS, PageRank) and dense kernels.
// A warp instruction names up to 32 lane addresses; the coalescer turns them into one request per
// distinct 128 B line, in lane order (as a GPU's L1/coalescer would). Arrays sit back to back, 64 KiB
// aligned, from address 0. Each warp has its own cycle counter advanced by a fixed compute cost per
// instruction; warps do not synchronize (no level barriers), which keeps the trace a pure function of the
// inputs.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "gpuio/zng.hpp"

namespace gpuio::zng {
namespace {

constexpr uint32_t kLine = 128, kLanes = 32, kComputeCycles = 16;

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Emitter {
 public:
  explicit Emitter(uint32_t warps) : cycle_(warps, 0) {
    if (warps == 0) throw std::invalid_argument("trace generator: warps must be > 0");
  }
  // Reserve an array of bytes; returns its base address.
  uint64_t array(uint64_t bytes) {
    uint64_t base = next_;
    next_ += (bytes + 0xFFFF) & ~uint64_t{0xFFFF};
    return base;
  }
  void instr(uint32_t warp, uint32_t pc, const uint64_t* addrs, uint32_t n, uint32_t elem, bool write) {
    uint64_t c = cycle_[warp] += kComputeCycles;
    uint64_t lines[kLanes];
    uint32_t counts[kLanes], m = 0;
    for (uint32_t i = 0; i < n; ++i) {
      uint64_t l = addrs[i] / kLine;
      uint32_t j = 0;
      while (j < m && lines[j] != l) ++j;
      if (j == m) lines[m] = l, counts[m++] = 0;
      ++counts[j];
    }
    for (uint32_t j = 0; j < m; ++j)
      out.push_back(Access{c, warp, pc, lines[j] * kLine, std::min(kLine, counts[j] * elem), write});
  }
  void coalesced(uint32_t warp, uint32_t pc, uint64_t addr, uint32_t elems, uint32_t elem, bool write) {
    uint64_t a[kLanes];
    for (uint32_t i = 0; i < elems; ++i) a[i] = addr + uint64_t{i} * elem;
    instr(warp, pc, a, elems, elem, write);
  }
  std::vector<Access> finish() {
    // Interleave warps by cycle (stable: ties keep emission order) so the file reads like a GPU's trace.
    std::stable_sort(out.begin(), out.end(), [](const Access& a, const Access& b) { return a.cycle < b.cycle; });
    return std::move(out);
  }
  std::vector<Access> out;

 private:
  std::vector<uint64_t> cycle_;
  uint64_t next_ = 0;
};

struct Csr {
  std::vector<uint32_t> row, col;
};

Csr random_graph(uint32_t v, uint32_t avg_degree, uint64_t seed) {
  if (v < 2 || avg_degree == 0) throw std::invalid_argument("graph generator: need >= 2 vertices and degree > 0");
  Csr g;
  g.row.resize(v + 1);
  uint64_t s = seed;
  for (uint32_t i = 0; i < v; ++i) {
    uint32_t deg = 1 + static_cast<uint32_t>(splitmix(s) % (2 * avg_degree - 1));  // mean avg_degree
    g.row[i + 1] = g.row[i] + deg;
  }
  g.col.resize(g.row[v]);
  for (auto& c : g.col) c = static_cast<uint32_t>(splitmix(s) % v);
  return g;
}

}  // namespace

std::vector<Access> gen_bfs(uint32_t vertices, uint32_t avg_degree, uint32_t warps, uint64_t seed) {
  Csr g = random_graph(vertices, avg_degree, seed);
  Emitter e(warps);
  uint64_t row = e.array(4ull * (vertices + 1)), col = e.array(4ull * g.col.size());
  uint64_t level = e.array(4ull * vertices), front = e.array(4ull * vertices), next = e.array(4ull * vertices);
  std::vector<int32_t> lv(vertices, -1);
  std::vector<uint32_t> cur{0}, nxt;
  lv[0] = 0;
  uint64_t a[kLanes];
  for (int32_t depth = 0; !cur.empty(); ++depth) {
    nxt.clear();
    for (size_t base = 0, chunk = 0; base < cur.size(); base += kLanes, ++chunk) {
      uint32_t w = static_cast<uint32_t>(chunk % warps), n = static_cast<uint32_t>(std::min<size_t>(kLanes, cur.size() - base));
      uint64_t fq = (depth & 1) ? next : front, nq = (depth & 1) ? front : next;
      e.coalesced(w, 0x10, fq + 4 * base, n, 4, false);
      for (uint32_t i = 0; i < n; ++i) a[i] = row + 4ull * cur[base + i];
      e.instr(w, 0x11, a, n, 4, false);
      uint32_t maxdeg = 0;
      for (uint32_t i = 0; i < n; ++i) maxdeg = std::max(maxdeg, g.row[cur[base + i] + 1] - g.row[cur[base + i]]);
      for (uint32_t j = 0; j < maxdeg; ++j) {
        uint32_t m = 0, lanes[kLanes];
        for (uint32_t i = 0; i < n; ++i) {
          uint32_t v = cur[base + i];
          uint32_t edge = g.row[v] + j;
          if (edge < g.row[v + 1]) lanes[m] = edge, a[m] = col + 4ull * edge, ++m;
        }
        e.instr(w, 0x12, a, m, 4, false);
        for (uint32_t i = 0; i < m; ++i) a[i] = level + 4ull * g.col[lanes[i]];
        e.instr(w, 0x13, a, m, 4, false);
        uint32_t k = 0;
        uint64_t wl[kLanes], wq[kLanes];
        for (uint32_t i = 0; i < m; ++i) {
          uint32_t u = g.col[lanes[i]];
          if (lv[u] >= 0) continue;
          lv[u] = depth + 1;
          wl[k] = level + 4ull * u;
          wq[k++] = nq + 4ull * nxt.size();
          nxt.push_back(u);
        }
        if (k) e.instr(w, 0x14, wl, k, 4, true), e.instr(w, 0x15, wq, k, 4, true);
      }
    }
    std::swap(cur, nxt);
  }
  return e.finish();
}

std::vector<Access> gen_pagerank(uint32_t vertices, uint32_t avg_degree, uint32_t iterations, uint32_t warps,
                                 uint64_t seed) {
  Csr g = random_graph(vertices, avg_degree, seed);  // in-edges: col holds sources
  Emitter e(warps);
  uint64_t row = e.array(4ull * (vertices + 1)), col = e.array(4ull * g.col.size());
  uint64_t rank[2] = {e.array(4ull * vertices), e.array(4ull * vertices)};
  uint64_t a[kLanes];
  for (uint32_t it = 0; it < iterations; ++it) {
    uint64_t src = rank[it & 1], dst = rank[(it + 1) & 1];
    for (uint32_t base = 0, chunk = 0; base < vertices; base += kLanes, ++chunk) {
      uint32_t w = chunk % warps, n = std::min(kLanes, vertices - base);
      e.coalesced(w, 0x20, row + 4ull * base, n, 4, false);
      uint32_t maxdeg = 0;
      for (uint32_t i = 0; i < n; ++i) maxdeg = std::max(maxdeg, g.row[base + i + 1] - g.row[base + i]);
      for (uint32_t j = 0; j < maxdeg; ++j) {
        uint32_t m = 0, lanes[kLanes];
        for (uint32_t i = 0; i < n; ++i) {
          uint32_t edge = g.row[base + i] + j;
          if (edge < g.row[base + i + 1]) lanes[m] = edge, a[m] = col + 4ull * edge, ++m;
        }
        e.instr(w, 0x21, a, m, 4, false);
        for (uint32_t i = 0; i < m; ++i) a[i] = src + 4ull * g.col[lanes[i]];
        e.instr(w, 0x22, a, m, 4, false);
      }
      e.coalesced(w, 0x23, dst + 4ull * base, n, 4, true);
    }
  }
  return e.finish();
}

std::vector<Access> gen_gemm(uint32_t n, uint32_t tile, uint32_t warps) {
  if (tile == 0 || tile > kLanes || n % tile) throw std::invalid_argument("gemm generator: n=" + std::to_string(n) + " must be a multiple of tile=" + std::to_string(tile) + " (1..32)");
  Emitter e(warps);
  uint64_t A = e.array(4ull * n * n), B = e.array(4ull * n * n), C = e.array(4ull * n * n);
  uint32_t tiles = n / tile, t = 0;
  for (uint32_t bi = 0; bi < tiles; ++bi)
    for (uint32_t bj = 0; bj < tiles; ++bj, ++t) {
      uint32_t w = t % warps;
      for (uint32_t bk = 0; bk < tiles; ++bk) {
        for (uint32_t r = 0; r < tile; ++r) e.coalesced(w, 0x30, A + 4ull * ((bi * tile + r) * uint64_t{n} + bk * tile), tile, 4, false);
        for (uint32_t r = 0; r < tile; ++r) e.coalesced(w, 0x31, B + 4ull * ((bk * tile + r) * uint64_t{n} + bj * tile), tile, 4, false);
      }
      for (uint32_t r = 0; r < tile; ++r) e.coalesced(w, 0x32, C + 4ull * ((bi * tile + r) * uint64_t{n} + bj * tile), tile, 4, true);
    }
  return e.finish();
}

std::vector<Access> gen_stencil(uint32_t n, uint32_t iterations, uint32_t warps) {
  if (n < 3 || n % kLanes) throw std::invalid_argument("stencil generator: n=" + std::to_string(n) + " must be a multiple of 32 and >= 32");
  Emitter e(warps);
  uint64_t grid[2] = {e.array(4ull * n * n), e.array(4ull * n * n)};
  uint32_t chunk = 0;
  for (uint32_t it = 0; it < iterations; ++it)
    for (uint32_t y = 1; y + 1 < n; ++y)
      for (uint32_t x = 0; x < n; x += kLanes, ++chunk) {
        uint32_t w = chunk % warps;
        uint64_t in = grid[it & 1], out = grid[(it + 1) & 1];
        e.coalesced(w, 0x40, in + 4ull * ((y - 1) * uint64_t{n} + x), kLanes, 4, false);
        e.coalesced(w, 0x41, in + 4ull * (y * uint64_t{n} + x), kLanes, 4, false);
        e.coalesced(w, 0x42, in + 4ull * ((y + 1) * uint64_t{n} + x), kLanes, 4, false);
        e.coalesced(w, 0x43, out + 4ull * (y * uint64_t{n} + x), kLanes, 4, true);
      }
  return e.finish();
}

std::vector<Access> gen_vecadd(uint64_t n, uint32_t warps) {
  Emitter e(warps);
  uint64_t a = e.array(4 * n), b = e.array(4 * n), c = e.array(4 * n);
  for (uint64_t i = 0, chunk = 0; i < n; i += kLanes, ++chunk) {
    uint32_t w = static_cast<uint32_t>(chunk % warps), m = static_cast<uint32_t>(std::min<uint64_t>(kLanes, n - i));
    e.coalesced(w, 0x50, a + 4 * i, m, 4, false);
    e.coalesced(w, 0x51, b + 4 * i, m, 4, false);
    e.coalesced(w, 0x52, c + 4 * i, m, 4, true);
  }
  return e.finish();
}

std::vector<std::string> workload_names() { return {"bfs", "pagerank", "gemm", "stencil", "vecadd"}; }

std::vector<Access> generate(const std::string& w, double scale, uint64_t seed) {
  if (!(scale > 0 && scale <= 64)) throw std::invalid_argument("trace scale " + std::to_string(scale) + " must lie in (0, 64]");
  const uint32_t warps = 128;
  auto round32 = [](double x) { return std::max<uint32_t>(64, static_cast<uint32_t>(x / 32) * 32); };
  if (w == "bfs") return gen_bfs(std::max<uint32_t>(64, static_cast<uint32_t>(131072 * scale)), 8, warps, seed);
  if (w == "pagerank") return gen_pagerank(std::max<uint32_t>(64, static_cast<uint32_t>(131072 * scale)), 8, 2, warps, seed);
  if (w == "gemm") return gen_gemm(round32(768 * std::sqrt(scale)), 32, warps);
  if (w == "stencil") return gen_stencil(round32(1536 * std::sqrt(scale)), 2, warps);
  if (w == "vecadd") return gen_vecadd(static_cast<uint64_t>(2097152 * scale), warps);
  std::string known;
  for (auto& n : workload_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown ZnG workload '" + w + "': expected one of " + known);
}

}  // namespace gpuio::zng
