"""One measured pass: the engine (through gpuio.Engine, as an application drives it) or the raw reference.

Both return the same record: bytes moved, wall seconds, process CPU seconds (getrusage, so the
engine's figure includes its workers, the submitting Python thread and any kernel io workers, and the
raw figure all of its threads). Time-bound: requests keep being issued until `seconds` elapse.
"""
from __future__ import annotations

import collections
import resource
import time

import numpy as np

from gpuio.engine import aligned_empty
from gpuio.engine import Engine
from .datafile import MARKER_BYTES
from .workloads import RAW_GRID, EngineConfig, RawConfig, Workload

BLOCK_BYTES = 4096


def process_cpu_seconds() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


class _BlockSource:
    """Batches of logical block ids: runs of request_bytes/4096 blocks, random or sequential, all past the data
    file's marker (its first MARKER_BYTES: a write pass leaves it, so the next run still knows the file).
    Random batches come from a pre-drawn pool so drawing them costs nothing inside the timed loop."""

    def __init__(self, w: Workload, total_blocks: int, seed: int, pool: int = 32):
        self.per = w.request_bytes // BLOCK_BYTES
        self.first = -(-MARKER_BYTES // w.request_bytes)  # requests [0, first) hold the marker
        self.requests = total_blocks // self.per - self.first
        self.n = w.batch_requests
        self.sequential = w.sequential
        self.cursor = 0
        step = np.arange(self.per, dtype=np.int64)
        if not self.sequential:
            rng = np.random.default_rng(seed)
            self.pool = [(((rng.integers(0, self.requests, self.n, dtype=np.int64) + self.first) * self.per)[:, None]
                          + step).ravel() for _ in range(pool)]
        else:
            self.step = np.arange(self.n * self.per, dtype=np.int64)
        self.i = 0

    def next(self) -> np.ndarray:
        self.i += 1
        if not self.sequential:
            return self.pool[self.i % len(self.pool)]
        if self.cursor + self.n > self.requests:
            self.cursor = 0
        first = (self.first + self.cursor) * self.per
        self.cursor += self.n
        return self.step + first


def engine_pass(path: str, w: Workload, cfg: EngineConfig, workers: int, seconds: float, seed: int = 0) -> dict:
    with Engine(path, backend=cfg.backend, workers=workers, direct=True, queue_depth=cfg.queue_depth) as eng:
        src = _BlockSource(w, eng.total_blocks, seed)
        if src.requests < w.batch_requests:
            raise ValueError(f"data file too small for {w.name}: {src.requests} requests of "
                             f"{w.request_bytes} bytes, a batch needs {w.batch_requests}")
        batch_bytes = w.batch_requests * w.request_bytes
        bufs = [aligned_empty(batch_bytes) for _ in range(w.batches_inflight)]
        for i, b in enumerate(bufs):  # touch every page before timing, as the raw reference does
            b[:] = np.frombuffer(np.random.default_rng(seed + i).bytes(64), np.uint8).repeat(len(b) // 64)
        submit = eng.read_async if w.op == "read" else eng.write_async
        s0, cpu0, t0 = eng.stats(), process_cpu_seconds(), time.perf_counter()
        end = t0 + seconds
        inflight = collections.deque(submit(src.next(), b) for b in bufs)
        batches = 0
        while inflight:
            h = inflight.popleft()
            buf = h.wait()
            batches += 1
            if time.perf_counter() < end:
                inflight.append(submit(src.next(), buf))
        t1, cpu1, s1 = time.perf_counter(), process_cpu_seconds(), eng.stats()
    nbytes = batches * batch_bytes
    return {
        "bytes": nbytes, "seconds": t1 - t0, "cpu_seconds": cpu1 - cpu0,
        "requests": nbytes // w.request_bytes, "device_ops": s1["ops"] - s0["ops"],
        "worker_cpu_seconds": s1["worker_cpu_seconds"] - s0["worker_cpu_seconds"],
        "busy_worker_seconds": s1["busy_worker_seconds"] - s0["busy_worker_seconds"],
        "workers": s1["workers"], "active_workers": s1["active_workers"],
        "data_path": s1["data_path"], "backend_detail": s1["backend"],
    }


def raw_pass(path: str, w: Workload, cfg: RawConfig, seconds: float) -> dict:
    """The raw reference's pass of `gpuio bench`: clear of the data file's marker, as the engine's (_BlockSource)."""
    return _raw(path, w.request_bytes, w.sequential, w.op == "write", cfg, seconds, skip_bytes=MARKER_BYTES)


def raw_best(path: str, request_bytes: int, sequential: bool, write: bool, seconds: float,
             grid=RAW_GRID) -> tuple[dict, str]:
    """The raw reference at its best over ``grid`` on ``path``: (the fastest pass's record, its configuration's
    label). Configurations the file is too small for (fewer requests than threads) are skipped; ({}, "") when
    none ran. One request size, so bytes/s and requests/s rank alike."""
    best: tuple[dict, str] = ({}, "")
    for cfg in grid:
        try:
            r = _raw(path, request_bytes, sequential, write, cfg, seconds)
        except ValueError:
            continue
        if not best[0] or r["bytes"] / r["seconds"] > best[0]["bytes"] / best[0]["seconds"]:
            best = (r, cfg.label)
    return best


def raw_bench(path: str, *, block_bytes: int = 4096, queue_depth: int = 32, threads: int = 1, seconds: float = 1.0,
              uring: bool = True, sequential: bool = False, write: bool = False, direct: bool = True,
              ops_max: int = 0, skip_bytes: int = 0, dest_bytes: int = 0) -> dict:
    """The in-tree raw-device reference (C++, iobench's algorithm, no engine, no Python per request; the module
    gpuio_apps._raw, built from cpp/tools/raw beside the library): `threads` threads each keep `queue_depth` requests
    of `block_bytes` on `path` for `seconds` (io_uring, or pread/pwrite with uring=False). Returns dict(ops,
    bytes, seconds, cpu_seconds). No request touches the file's first skip_bytes (rounded up to whole requests).
    dest_bytes > 0: the requests land in that much memory, rotated, as a program delivering that many bytes would
    (0: queue_depth x block_bytes, iobench's buffers, which stay in the CPU's caches)."""
    from .. import _raw

    return _raw.raw_bench(path, block_bytes=block_bytes, queue_depth=queue_depth, threads=threads, seconds=seconds,
                          uring=uring, sequential=sequential, write=write, direct=direct, ops_max=ops_max,
                          skip_bytes=skip_bytes, dest_bytes=dest_bytes)


def _raw(path: str, request_bytes: int, sequential: bool, write: bool, cfg: RawConfig, seconds: float,
         skip_bytes: int = 0) -> dict:
    r = raw_bench(path, block_bytes=request_bytes, queue_depth=cfg.queue_depth, threads=cfg.threads,
                  seconds=seconds, uring=cfg.uring, sequential=sequential, write=write, direct=True,
                  skip_bytes=skip_bytes)
    return {"bytes": r["bytes"], "seconds": r["seconds"], "cpu_seconds": r["cpu_seconds"], "requests": r["ops"]}
