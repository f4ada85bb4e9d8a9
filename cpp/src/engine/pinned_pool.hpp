// The process's one pinned pool (gpuio/pinned_pool.hpp says what it holds and why): its blocks, and the count of
// the page-locked memory the GPU layer makes outside it. It lives in the engine layer because the engine's staging
// is one of its blocks; the CUDA registration is compiled in only with the CUDA layer (GPUIO_HAVE_CUDA), and on a
// build without it blocks are plain 2 MiB-page memory (registered() false).
// Thread contract: every call from any thread (one mutex, never held across a system or CUDA call).
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpuio::detail {

// What becomes of a block when its holder lets go of it.
enum class PinnedReuse {
  pooled,  // back to the free list, registered as it is, for the next take of its size
  owned,   // unregistered and unmapped
};

class PinnedBlock {
 public:
  // A block of bytes rounded up to 2 MiB (2 MiB aligned, advised MADV_HUGEPAGE), counted under `use` (a name with
  // static storage: "plan_reader", "engine_staging", ...). A pooled take reuses a free block of that size first.
  // registered: page-locked with CUDA now (portable and mapped) where the CUDA layer is built and CUDA accepts;
  // registered() says. touch_bytes: bytes of a new block faulted in now (in 2 MiB pages where the kernel gives
  // them), all of them for a pooled block or a registered one. std::bad_alloc when the memory cannot be mapped.
  static std::unique_ptr<PinnedBlock> take(size_t bytes, bool registered, PinnedReuse reuse, const char* use,
                                           size_t touch_bytes = SIZE_MAX);
  ~PinnedBlock();
  PinnedBlock(const PinnedBlock&) = delete;
  PinnedBlock& operator=(const PinnedBlock&) = delete;

  // Registers the block with CUDA in place, if it is not; false where CUDA refuses (why: CUDA's words), where the
  // CUDA layer is not built, or in a forked child holding its parent's block.
  bool register_now(std::string* why = nullptr);
  // Undoes register_now (a pooled block normally keeps its registration for its next holder).
  void unregister_now();

  uint8_t* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  bool registered() const { return registered_; }
  PinnedReuse reuse() const { return reuse_; }
  const char* use() const { return use_; }

 private:
  PinnedBlock(uint8_t* d, size_t b, bool r, PinnedReuse reuse, const char* use, pid_t pid)
      : data_(d), bytes_(b), registered_(r), reuse_(reuse), use_(use), pid_(pid) {}
  uint8_t* data_;
  size_t bytes_;
  bool registered_;
  PinnedReuse reuse_;
  const char* use_;
  pid_t pid_;  // the process whose pool made it: a forked child's copy is not in its own pool
};

// Page-locked memory the GPU layer allocated itself (gpu/host_alloc.hpp), counted in the pool's stats under `use`:
// +bytes when made, -bytes when freed.
void pinned_note_fixed(const char* use, int64_t bytes);

// (address, bytes) of each free pooled block: for diagnostics (which pages the kernel gave), not for a data path.
std::vector<std::pair<uintptr_t, size_t>> pinned_pool_free_blocks();

}  // namespace gpuio::detail
