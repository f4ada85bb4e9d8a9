"""What the Python around a stream-ordered one-block read costs, piece by piece (the 2 x pread bar:
docs/decisions/0003, 0007).

Each piece is timed alone with timeit (best of 5 repeats, microseconds per call), the way it ran before
(`old`) and the way gpuio.engine / gpuio.gpu run it now (`new`):

  ids          block_ids() on int64 NumPy ids (the generic check)   vs the engine's shortcut test
  export       Tensor.__dlpack__ (what nanobind calls on a tensor)  vs torch.utils.dlpack.to_dlpack
  import       a binding taking the tensor (nanobind via __dlpack__) vs taking the capsule
  device       x.device.index                                        vs x.get_device()
  handle       StreamHandle with a per-call tuple, as before         vs the request's gpuio.Future now
and on a GPU also
  stream       torch.cuda.current_stream(d).cuda_stream              vs torch._C._cuda_getCurrentRawStream(d)
  event        torch.cuda.Event() + record(stream) (+ its destruction) vs the C++ pooled event (stream_submit
               of zero blocks: the call with only its completion record)
  poll         one torch Event.query() + time.monotonic() (the old wait loop's step) vs one StreamDone.query()

    python -m gpuio_apps.bench.latency_parts          # prints the table (CPU rows only without CUDA)
"""
from __future__ import annotations

import time
import timeit
from typing import Callable

import numpy as np


def _us(fn: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


class _OldHandle:  # the StreamHandle of 588d636: its slots, built with two tuples per call
    __slots__ = ("_gpu", "_event", "_before", "_result", "_keep", "_what")

    def __init__(self, gpu, event, before, result, keep, what):
        self._gpu, self._event, self._before, self._result, self._keep = gpu, event, before, result, keep
        self._what = what


def pieces(number: int = 20000, engine=None) -> list[dict]:
    """One dict per piece: name, old_us, new_us, saved_us. engine: a gpuio.Engine whose GPU path is used for
    the GPU rows (CPU rows only when None or without CUDA)."""
    import torch
    from torch.utils.dlpack import to_dlpack

    from gpuio import _buffers, _core
    from gpuio.future import Future
    from gpuio.gpu import StreamRequest

    rows = []

    def row(name, old, new, n=number):
        o, w = _us(old, n), _us(new, n)
        rows.append(dict(name=name, old_us=o, new_us=w, saved_us=o - w))

    ids = np.array([5], dtype=np.int64)
    i64 = np.dtype(np.int64)
    row("ids: block_ids() vs shortcut test", lambda: _buffers.block_ids(ids),
        lambda: type(ids) is np.ndarray and ids.dtype == i64 and ids.ndim == 1 and ids.flags.c_contiguous)
    gpu = engine is not None and engine.gpu_attached and torch.cuda.is_available()
    t = torch.empty((1, 4096), dtype=torch.uint8, device="cuda" if gpu else "cpu")
    row("export: Tensor.__dlpack__ vs to_dlpack", lambda: t.__dlpack__(max_version=(1, 0)), lambda: to_dlpack(t))
    small = torch.zeros(16, dtype=torch.uint8)  # crc32c: a host-only binding taking an ndarray
    row("import: binding(tensor) vs binding(capsule)", lambda: _core.crc32c(small),
        lambda: _core.crc32c(to_dlpack(small)))
    row("device: x.device.index vs x.get_device()", lambda: t.device.index, lambda: t.get_device())
    def future():  # what GpuRuntime.submit builds per call
        req = StreamRequest(None, None, ids, 0, 1, 7, 0)
        return Future(req, t, None, req.event)

    row("handle: tuple-built vs the request's Future",
        lambda: _OldHandle(None, None, 0, t, (ids, t), (0, len(ids), 1, 7)), future)
    if gpu:
        g = engine.gpu
        dev = t.get_device()
        row("stream: current_stream() vs raw stream", lambda: torch.cuda.current_stream(dev).cuda_stream,
            lambda: g.raw_stream(dev), n=number // 4)
        s = g.raw_stream(dev)
        empty_ids, empty = np.zeros(0, dtype=np.int64), torch.empty(0, dtype=torch.uint8, device=t.device)

        cur = torch.cuda.current_stream(dev)

        def torch_event():  # made, recorded, destroyed: what every call did
            ev = torch.cuda.Event()
            ev.record(cur)

        # new: a whole zero-block call (capsule export, binding checks, the pooled event's record), so an upper bound
        row("event: torch Event+record vs 0-block call (pooled event)", torch_event,
            lambda: g.runtime.stream_submit(s, 0, empty_ids, to_dlpack(empty)), n=number // 4)
        ev = torch.cuda.Event()
        ev.record()
        done = g.runtime.stream_submit(s, 0, empty_ids, empty)
        torch.cuda.synchronize()
        row("poll: torch Event.query()+monotonic vs StreamDone.query()",
            lambda: ev.query() and time.monotonic(), lambda: done.query(), n=number // 4)
    return rows


def print_rows(rows: list[dict], log=print) -> None:
    for r in rows:
        log(f"latency part {r['name']:58s} old {r['old_us']:6.2f} us  new {r['new_us']:6.2f} us  "
            f"saved {r['saved_us']:6.2f} us")
    # export is inside import (nanobind calls __dlpack__): counted once, for the one tensor of a host-ids read
    total = sum(r["saved_us"] for r in rows if not r["name"].startswith("export"))
    log(f"latency part {'total saved per one-block host-ids call (export in import)':58s} {total:6.2f} us")


def run(path: str, log=print, gpu: bool = True, number: int = 20000) -> list[dict]:
    """pieces() with a one-worker engine on `path` (its GPU path attached when gpu and CUDA allow), printed."""
    from gpuio.engine import Engine

    eng = Engine(path, workers=1, writable=False)
    try:
        if gpu:
            try:
                eng.attach_gpu()
            except Exception as e:  # noqa: BLE001 - the CPU rows still mean something
                log(f"latency part GPU rows skipped: {type(e).__name__}: {e}")
        rows = pieces(number, eng)
    finally:
        eng.close()
    print_rows(rows, log)
    return rows


if __name__ == "__main__":
    import os
    import tempfile

    from gpuio.engine import Engine
    from gpuio.gpu import cuda_built

    f = os.path.join(tempfile.gettempdir(), f"gpuio-parts-{os.getpid()}.bin")
    Engine.create_file(f, 1 << 20)
    try:
        run(f, gpu=cuda_built())
    finally:
        os.unlink(f)
