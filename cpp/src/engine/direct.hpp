// The caller-submits path for backends with direct_submission() (rbd): a host batch's extents go from the
// submitting thread straight to the backend's library, and the library's completion thread finishes them
// (bookkeeping, failure record, the batch's state word and its waiter's wake-up). No worker thread, inbox or
// queue in between: per batch, two thread hand-offs instead of four (caller -> worker -> library ->
// worker -> caller). A batch's requests live in the batch (one allocation per batch, none per request).
// At most direct_slots requests (queue_depth per worker thread, what the worker path would hold) are with the
// library at once; the rest wait in a FIFO across batches, and each completion issues the next from the
// library's thread. So a large batch, or several, keep the device queue full request by request (like fio's
// iodepth), not batch by batch, and a batch of 100 000 blocks does not hand librbd 100 000 requests at once.
#pragma once
#include <vector>

#include "engine/batch.hpp"
#include "engine/extent.hpp"

namespace gpuio::detail {

struct DirectOp : DirectRequest {
  Extent e;
  uint32_t done_bytes = 0;  // transferred so far (a short transfer is resubmitted for the rest)
};

struct DirectBatch : Batch {
  std::vector<DirectOp> ops;
};

// Issue every op of b (from the submitting thread). Each finishes through direct_complete().
void issue_direct(EngineImpl& engine, DirectBatch& b);

}  // namespace gpuio::detail
