"""gpuio.Engine: batches of logical blocks to and from host (or, with the CUDA layer, GPU) memory.

    with gpuio.Engine("data.bin") as eng:
        out = np.empty(len(blocks) * 4096, np.uint8)
        eng.read(blocks, out)

Every knob has a documented default (DEFAULTS). Errors name the offending value: ValueError/TypeError/
IndexError for bad arguments, OSError (errno kept) for failed I/O, naming block, device and offset.
"""
from __future__ import annotations

import atexit
import collections
import os
import sys
import weakref
from typing import Any, Iterable

from . import _buffers
from ._buffers import block_ids, data_buffer

# Documented defaults for the keyword options of Engine (C++ limits.hpp holds the same numbers).
DEFAULTS = {
    "direct": True,            # O_DIRECT; False goes through the page cache (file systems without O_DIRECT)
    "writable": True,          # open devices read-write
    "queue_depth": 128,        # entries per worker ring
    "staging_bytes": 32 << 20,  # fixed staging pool (unaligned/GPU buffers go through it)
    "staging_slot_bytes": 128 << 10,
    "io_bytes_max": 1 << 20,   # contiguous runs are merged up to this many bytes per device request
    "io_timeout_ms": 60000,
    "direct_min_bytes": 16 << 10,  # O_DIRECT runs shorter than this go through registered staging (cheaper
                                   #   than pinning a fresh page per small request on virtual disks); 0: never    # a batch not complete by then raises OSError(ETIMEDOUT)
    "sqpoll": False,           # uring: kernel thread polls the submission queue
    "iopoll": False,           # uring: polled completions, only where the device supports it (reported)
    "posix_threads": 32,       # posix backend: pread/pwrite threads per worker queue
    "lock": False,             # exclusive flock on every device (single writer; survives kill -9 safely)
    "lock_wait_ms": 10000,     # how long to wait for another holder's lock before OSError(EWOULDBLOCK)
    "sim": None,               # backend "sim" (paths are names like "sim0"): dict(preset, device_bytes, paced,
                               #   backing_dir, channels, write_buffer_pages, seed); GPUIO_SIM env overrides
    "rbd": None,               # backend "rbd" (paths "rbd:POOL[/NAMESPACE]/IMAGE"): dict(conf, user, keyring,
                               #   exclusive, lock_wait_ms, break_lock, timeout_s, op_timeout_s); gpuio.volumes
    "fault": None,             # fault:<backend>: dict(seed, eio_rate, short_rate, latency_rate, latency_us,
                               #   torn_write_rate, disappear_after, disappear_device, bytes_per_s)
}

READ, WRITE = 0, 1

# Engines still open when the interpreter exits are closed first: their worker and control-plane threads
# must stop before C++ static destructors and the CUDA runtime's teardown run under them.
_open_engines: "weakref.WeakSet[Engine]" = weakref.WeakSet()


@atexit.register
def _close_open_engines() -> None:
    for eng in list(_open_engines):
        try:
            eng.close()
        except Exception as e:  # noqa: BLE001 - say it, but let the other engines close too
            print(f"gpuio: closing {eng!r} at exit failed: {e}", file=sys.stderr)


def _core():
    from . import _core as core  # the compiled module; imported here so errors say what is missing

    return core


class Handle:
    """A submitted batch. wait() raises the batch's error; done() polls. Holds the batch's buffers."""

    __slots__ = ("_h", "_keep", "_result")

    def __init__(self, h, keep, result):
        self._h, self._keep, self._result = h, keep, result

    def done(self) -> bool:
        return self._h.done()

    def wait(self, timeout: float | None = None):
        """Block until the batch is complete (timeout in seconds; None: the engine's io_timeout_ms)."""
        self._h.wait(-1 if timeout is None else int(timeout * 1000))
        return self._result

    @property
    def seq(self) -> int:
        return self._h.seq


class Engine:
    """CPU-managed I/O engine over one device or RAID-0 stripes of several (files or block devices)."""

    def __init__(self, paths: str | os.PathLike | Iterable[str | os.PathLike], block_size: int = 4096,
                 stripe_bytes: int = 65536, backend: str = "uring", workers: int | None = None, **options: Any):
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        paths = [os.fspath(p) for p in paths]
        if not paths:
            raise ValueError("paths is empty: give at least one file or block device")
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown Engine option(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}")
        for name, value in (("block_size", block_size), ("stripe_bytes", stripe_bytes)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if workers is not None and (not isinstance(workers, int) or workers < 1):
            raise ValueError(f"workers must be None (dynamic) or an int >= 1, got {workers!r}")
        if backend == "uring" and all(p.startswith("rbd:") and not os.path.exists(p) for p in paths):
            backend = "rbd"  # Ceph volumes (gpuio.volumes): "rbd:POOL[/NAMESPACE]/IMAGE"
        opts = dict(DEFAULTS, **options)
        if opts["fault"] is not None and not backend.startswith("fault:"):
            raise ValueError(f"fault options given but backend={backend!r}; use backend='fault:{backend}'")
        opts.update(block_size=block_size, stripe_bytes=stripe_bytes, backend=backend, workers=workers or 0)
        self._core = _core().EngineCore(paths, opts)
        self.paths = paths
        self.block_size = block_size
        self.backend = backend
        self._inflight: collections.deque[Handle] = collections.deque()
        self._gpu = None  # the CUDA layer's stream-ordered path, created on first use
        _open_engines.add(self)

    # -- properties -----------------------------------------------------------------------------------------
    @property
    def total_blocks(self) -> int:
        return self._core.total_blocks

    @property
    def devices(self) -> list[dict]:
        return self._core.devices

    @property
    def closed(self) -> bool:
        return self._core.closed

    # -- I/O ------------------------------------------------------------------------------------------------
    def _submit(self, op: int, blocks: Any, buf: Any, name: str) -> Handle:
        if self._core.closed:
            raise ValueError("engine is closed")
        ids = block_ids(blocks)
        n = ids.nbytes // 8
        data = data_buffer(buf, n * self.block_size, writable=(op == READ), name=name)
        if ids.kind == _buffers.DEVICE or data.kind == _buffers.DEVICE:
            return self._gpu_submit(op, ids, data, n, buf)
        while self._inflight and self._inflight[0].done():
            self._inflight.popleft()
        h = Handle(self._core.submit(op, ids.ptr, n, data.ptr, 0), (ids.owner, data.owner), buf)
        self._inflight.append(h)
        return h

    def _gpu_submit(self, op, ids, data, n, buf) -> Handle:
        from . import gpu

        return gpu.submit(self, op, ids, data, n, buf)

    def read_async(self, blocks: Any, out: Any) -> Handle:
        """Start reading blocks into out (len(blocks) * block_size bytes). The handle's wait() returns out."""
        return self._submit(READ, blocks, out, "out")

    def write_async(self, blocks: Any, src: Any) -> Handle:
        """Start writing src (len(blocks) * block_size bytes) to blocks."""
        return self._submit(WRITE, blocks, src, "src")

    def read(self, blocks: Any, out: Any):
        return self.read_async(blocks, out).wait()

    def write(self, blocks: Any, src: Any) -> None:
        self.write_async(blocks, src).wait()

    def sync(self) -> None:
        """Make completed writes durable (fdatasync on every device)."""
        if self._core.closed:
            raise ValueError("engine is closed")
        self._core.sync()

    def stats(self) -> dict:
        """ops, bytes, busy_worker_seconds, worker_cpu_seconds, active_workers, data_path, backend, ..."""
        s = self._core.stats()
        if self._gpu is not None:
            s.update(self._gpu.stats())
        return s

    def close(self) -> None:
        """Finish the batches in flight, stop the workers. Idempotent."""
        if self._gpu is not None:  # stops taking GPU requests first; it closes the engine core too
            self._gpu.close()
        if not self._core.closed:
            self._core.close()
        self._inflight.clear()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.total_blocks} blocks"
        return f"gpuio.Engine({self.paths!r}, block_size={self.block_size}, backend={self.backend!r}, {state})"

    @staticmethod
    def create_file(path: str | os.PathLike, nbytes: int) -> None:
        """Create (or extend) a file of nbytes to use as a device."""
        if not isinstance(nbytes, int) or nbytes <= 0:
            raise ValueError(f"nbytes must be a positive int, got {nbytes!r}")
        _core().EngineCore.create_file(os.fspath(path), nbytes)
