#include "engine/direct.hpp"

#include <cerrno>

#include "engine/engine_impl.hpp"

namespace gpuio::detail {
namespace {

void aim(DirectOp& d) {  // the request for what is left of the extent
  d.buf = d.e.mem + d.done_bytes;
  d.offset = d.e.offset + d.done_bytes;
  d.len = d.e.len - d.done_bytes;
}

// On the backend library's thread (or the submitter's, when the request never reached the device).
void direct_complete(DirectRequest* r, int64_t res) {
  DirectOp& d = *static_cast<DirectOp*>(r);
  Batch* b = d.e.batch;
  EngineImpl* engine = b->engine;
  engine->direct_ops.fetch_add(1, std::memory_order_relaxed);
  int err = 0;
  if (res < 0) {
    err = static_cast<int>(-res);
  } else if (res == 0) {
    err = d.e.op == IoOp::read ? ENODATA : EIO;  // past the end: never silent
  } else {
    engine->direct_bytes.fetch_add(static_cast<uint64_t>(res), std::memory_order_relaxed);
    d.done_bytes += static_cast<uint32_t>(res);
    if (d.done_bytes < d.e.len) {
      engine->direct_short.fetch_add(1, std::memory_order_relaxed);
      aim(d);
      int rc = engine->backend->submit_direct(&d);
      if (rc == 0) return;
      err = -rc;
    }
  }
  if (err != 0) d.e.fail(d.done_bytes, engine->opts.block_size, err);
  b->extent_finished();  // may free the batch (and d): touch neither after this
  engine->direct_release();
}

}  // namespace

void issue_direct(EngineImpl& engine, DirectBatch& b) {
  for (DirectOp& d : b.ops) {
    d.done = &direct_complete;
    d.user_data = 0;
    d.device = d.e.device;
    d.op = d.e.op;
    aim(d);
    int rc = engine.backend->submit_direct(&d);
    if (rc < 0) direct_complete(&d, rc);
  }
}

}  // namespace gpuio::detail
