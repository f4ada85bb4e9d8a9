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

// One request of d ended with res (bytes, or -errno). Returns the op to issue next in the slot it held: d itself
// for the rest of a short transfer, the oldest op waiting for a slot, or nullptr (the slot is free).
DirectOp* finish(EngineImpl& engine, DirectOp& d, int64_t res) {
  engine.direct_ops.fetch_add(1, std::memory_order_relaxed);
  int err = 0;
  if (res < 0) {
    err = static_cast<int>(-res);
  } else if (res == 0) {
    err = d.e.op == IoOp::read ? ENODATA : EIO;  // past the end: never silent
  } else {
    engine.direct_bytes.fetch_add(static_cast<uint64_t>(res), std::memory_order_relaxed);
    d.done_bytes += static_cast<uint32_t>(res);
    if (d.done_bytes < d.e.len) {
      engine.direct_short.fetch_add(1, std::memory_order_relaxed);
      aim(d);
      return &d;
    }
  }
  if (err != 0) d.e.fail(d.done_bytes, engine.opts.block_size, err);
  d.e.batch->extent_finished();  // may free the batch (and d): touch neither after this
  return engine.direct_release();
}

// Issue d, and whatever takes its slot when an issue fails at once; returns when one request is with the
// library or no op is left to issue (a loop, not recursion: a failing device must not deepen the stack).
void run(EngineImpl& engine, DirectOp* d) {
  while (d != nullptr) {
    int rc = engine.backend->submit_direct(d);
    if (rc == 0) return;
    d = finish(engine, *d, rc);
  }
}

// On the backend library's thread: the completion, then the slot's next request from the same thread.
void direct_complete(DirectRequest* r, int64_t res) {
  DirectOp& d = *static_cast<DirectOp*>(r);
  EngineImpl& engine = *d.e.batch->engine;
  run(engine, finish(engine, d, res));
}

}  // namespace

void issue_direct(EngineImpl& engine, DirectBatch& b) {
  for (DirectOp& d : b.ops) {
    d.done = &direct_complete;
    d.user_data = 0;
    d.device = d.e.device;
    d.op = d.e.op;
    aim(d);
  }
  // The ops that got a slot go now; the others wait in the engine's FIFO and each completion issues the next
  // (EngineImpl::direct_admit/direct_release), so queue_depth requests stay in flight as fio's iodepth does.
  size_t now = engine.direct_admit(b);
  for (size_t i = 0; i < now; ++i) run(engine, &b.ops[i]);
}

}  // namespace gpuio::detail
