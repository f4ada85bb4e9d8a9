// Internals of the plan reader (gpuio/plan_reader.hpp): the process's pinned pool and the copy stage a piece's
// bytes leave the ring by (memcpy on the host; cudaMemcpyAsync on a few streams, gpu/plan_copy.cpp, with CUDA).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace gpuio::detail {

// A block of the pinned pool: 2 MiB aligned, advised MADV_HUGEPAGE, faulted in, registered with CUDA where the CUDA
// layer is built and a device takes it. Back to the pool (for the next take of its size) when destroyed.
class PinnedBlock {
 public:
  // A block of bytes (rounded up to 2 MiB); registered: page-locked for CUDA copies (where the CUDA layer is built
  // and registration succeeds: registered() says). std::bad_alloc when the memory cannot be mapped.
  static std::unique_ptr<PinnedBlock> take(size_t bytes, bool registered);
  ~PinnedBlock();
  PinnedBlock(const PinnedBlock&) = delete;
  PinnedBlock& operator=(const PinnedBlock&) = delete;
  uint8_t* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  bool registered() const { return registered_; }

 private:
  friend struct PinnedPool;
  PinnedBlock(uint8_t* d, size_t b, bool r) : data_(d), bytes_(b), registered_(r) {}
  uint8_t* data_;
  size_t bytes_;
  bool registered_;
};

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
bool cuda_register_host(void* p, size_t bytes);  // cudaHostRegister (portable, mapped); false where refused
void cuda_unregister_host(void* p);
#endif

}  // namespace gpuio::detail
