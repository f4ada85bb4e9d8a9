// CRC-32C (Castagnoli, iSCSI/ext4/NVMe polynomial 0x1EDC6F41, reflected) of a byte range: SSE4.2's crc32
// instruction where the CPU has it (checked at run time), else a table. Used for stream payload checksums.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gpuio {

// crc32c(b, n) continues a running value: crc32c(b + k, n - k, crc32c(b, k)) == crc32c(b, n).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);
bool crc32c_hardware();  // true when the SSE4.2 path is in use

}  // namespace gpuio
