// Internals of the plan reader (gpuio/plan_reader.hpp): the copy stage a piece's bytes leave the ring by (memcpy on
// the host; cudaMemcpyAsync on a few streams, gpu/plan_copy.cpp, with CUDA). The ring is a pooled block of the
// process's one pinned pool (engine/pinned_pool.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/pinned_pool.hpp"  // the ring's block

namespace gpuio::detail {

class CopyStage {
 public:
  virtual ~CopyStage() = default;
  // Copy n bytes from piece k's memory to dst (queued or done at once).
  virtual void copy(uint32_t piece, void* dst, const void* src, size_t n) = 0;
  // Every copy out of piece k has been given: the piece is free once they have ended.
  virtual void piece_done(uint32_t piece) = 0;
  // Whether piece k's copies have ended (wait: until they have). Throws std::runtime_error on a copy error.
  virtual bool piece_free(uint32_t piece, bool wait) = 0;
  // Waits for every copy; never throws (called while unwinding too); returns the first copy error's text or "".
  virtual const char* drain() = 0;
};

std::unique_ptr<CopyStage> make_host_copy_stage();
#ifdef GPUIO_HAVE_CUDA
// pieces: the ring's piece count (one event each). std::runtime_error naming the CUDA error.
std::unique_ptr<CopyStage> make_cuda_copy_stage(int device, uint32_t streams, uint32_t pieces);
#endif

}  // namespace gpuio::detail
