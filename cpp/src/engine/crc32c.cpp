#include "gpuio/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace gpuio {
namespace {

constexpr uint32_t poly = 0x82F63B78u;  // 0x1EDC6F41 bit-reflected

std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (poly & (0u - (c & 1u)));
    t[i] = c;
  }
  return t;
}

uint32_t crc_table(const uint8_t* p, size_t n, uint32_t c) {
  static const std::array<uint32_t, 256> table = make_table();
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
// Three independent crc32 chains over three thirds of each 3 x 8 KiB chunk hide the instruction's 3-cycle
// latency (one chain runs at a third of the unit's throughput); the chains are then joined by shifting
// the first two over the bytes that follow them: shifting a CRC over k zero bytes is linear over GF(2),
// done here with a precomputed 32x32 bit matrix per lane length (the "combine" step).
constexpr size_t lane = 8192;

struct Shift {  // multiply-by-x^(8*lane) modulo the polynomial, as 4 byte tables
  std::array<std::array<uint32_t, 256>, 4> t{};
};

uint32_t shift_zeros_slow(uint32_t c, size_t bytes) {  // for building the tables only
  for (size_t i = 0; i < bytes; ++i)
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (poly & (0u - (c & 1u)));
  return c;
}

const Shift& shift_table() {
  static const Shift s = [] {
    Shift r;
    // The shift is linear: shift(a ^ b) = shift(a) ^ shift(b), so per-byte tables of shifted basis values do.
    std::array<uint32_t, 32> basis{};
    for (int b = 0; b < 32; ++b) basis[b] = shift_zeros_slow(1u << b, lane);
    for (int byte = 0; byte < 4; ++byte)
      for (uint32_t v = 0; v < 256; ++v) {
        uint32_t acc = 0;
        for (int b = 0; b < 8; ++b)
          if (v & (1u << b)) acc ^= basis[byte * 8 + b];
        r.t[byte][v] = acc;
      }
    return r;
  }();
  return s;
}

inline uint32_t shift_lane(uint32_t c) {
  const Shift& s = shift_table();
  return s.t[0][c & 0xFF] ^ s.t[1][(c >> 8) & 0xFF] ^ s.t[2][(c >> 16) & 0xFF] ^ s.t[3][c >> 24];
}

__attribute__((target("sse4.2"))) uint32_t crc_hw(const uint8_t* p, size_t n, uint32_t c) {
  uint64_t c0 = c;
  while (n >= 3 * lane) {
    uint64_t c1 = 0, c2 = 0;
    const uint8_t* a = p;
    const uint8_t* b = p + lane;
    const uint8_t* d = p + 2 * lane;
    for (size_t i = 0; i < lane; i += 8) {
      uint64_t x, y, z;
      std::memcpy(&x, a + i, 8);
      std::memcpy(&y, b + i, 8);
      std::memcpy(&z, d + i, 8);
      c0 = _mm_crc32_u64(c0, x);
      c1 = _mm_crc32_u64(c1, y);
      c2 = _mm_crc32_u64(c2, z);
    }
    // crc(A B C) = shift(shift(crc A) ^ crc' B) ^ crc' C, where crc' starts from 0 (the ~ pre/post
    // conditioning is applied once, outside this function)
    uint32_t ab = shift_lane(static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
    c0 = shift_lane(ab) ^ static_cast<uint32_t>(c2);
    p += 3 * lane;
    n -= 3 * lane;
  }
  while (n >= 8) {
    uint64_t x;
    std::memcpy(&x, p, 8);
    c0 = _mm_crc32_u64(c0, x);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c0);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

bool have_sse42() {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}
#endif

}  // namespace

bool crc32c_hardware() {
#if defined(__x86_64__)
  return have_sse42();
#else
  return false;
#endif
}

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
#if defined(__x86_64__)
  if (have_sse42()) return ~crc_hw(p, n, c);
#endif
  return ~crc_table(p, n, c);
}

}  // namespace gpuio
