"""gpuio.Engine: batches of logical blocks to and from host (or, with the CUDA layer, GPU) memory.

    with gpuio.Engine("data.bin") as eng:
        out = np.empty(len(blocks) * 4096, np.uint8)
        eng.read(blocks, out)

Every knob's default, range and name come from C++ (EngineOptions, gpuio/engine.hpp): DEFAULTS below is
read from `_core.engine_defaults()`, and values are checked there, once. Errors name the offending value:
ValueError/TypeError/IndexError for bad arguments, OSError (errno kept) for failed I/O, naming block,
device and offset.
"""
from __future__ import annotations

import atexit
import collections
import os
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from ._buffers import block_ids, cuda_device, data_array

if TYPE_CHECKING:
    from .gpu import GpuPath

try:
    from . import _core as _core_module
except ImportError as e:  # pragma: no cover - a source checkout without the compiled module
    raise ImportError(f"gpuio's compiled core (gpuio._core) is missing: build it (scripts/setup.sh) ({e})") from e

# The defaults of every Engine keyword, as C++ sets them (EngineOptions). Read-only by convention.
DEFAULTS: dict = _core_module.engine_defaults()
_INT64 = np.dtype(np.int64)
_INT64_MAX = int(np.iinfo(np.int64).max)


def check_option(name: str, value: int) -> None:
    """Raise ValueError (TypeError for a non-int) naming `name` when `value` is outside that engine knob's
    range: the engine's own C++ check, for layers above that take the same knob (TensorFile's block_size)."""
    _core_module.check_engine_option(name, value)


READ, WRITE = 0, 1
ALIGN_BYTES = 4096  # O_DIRECT's buffer alignment on every device gpuio supports


def aligned_empty(nbytes: int, align: int = ALIGN_BYTES) -> np.ndarray:
    """An uninitialised uint8 NumPy array of nbytes whose data starts at an `align` boundary (default 4096),
    so the engine's O_DIRECT reads and writes land in it with no staging copy."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise ValueError(f"nbytes must be an int >= 0, got {nbytes!r}")
    if isinstance(align, bool) or not isinstance(align, int) or align < 1 or align & (align - 1):
        raise ValueError(f"align must be a power of two, got {align!r}")
    raw = np.empty(nbytes + align, dtype=np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start:start + nbytes]

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
    return _core_module


class Handle:
    """A submitted batch. wait() raises the batch's error; done() polls. The C++ handle holds the batch's
    arrays (keep-alive) until it is dropped."""

    __slots__ = ("_h", "_result")

    def __init__(self, h, result):
        self._h, self._result = h, result

    def done(self) -> bool:
        """True once the batch is complete (raises its error then, as wait() does)."""
        return self._h.done()

    def wait(self, timeout: float | None = None):
        """Block until the batch is complete (timeout in seconds; None: the engine's io_timeout_ms)."""
        self._h.wait(-1 if timeout is None else int(timeout * 1000))
        return self._result

    @property
    def seq(self) -> int:
        """The batch's sequence number in its engine (batches are numbered in submission order)."""
        return self._h.seq


class Engine:
    """CPU-managed I/O engine over one device or RAID-0 stripes of several (files or block devices).

    Keywords (defaults from C++ EngineOptions; ranges checked there, ValueError naming the option):
      block_size          bytes per logical block, a power of two >= every device's logical block size
      stripe_bytes        RAID-0 stripe unit over several paths (a multiple of block_size)
      backend             "uring" | "posix" | "sim" | "rbd" | "fault:<backend>"
      workers             worker threads; 0 (or None): dynamic: _core.auto_workers(N) threads (CAM's ceil(N/2) at
                          least, up to the CPUs, at most 8), the controller picks how many work by measured
                          rate (stats()['controller'] says where it settled); rbd: ceil(N/2) threads
      queue_depth         entries per worker ring
      staging_bytes       fixed staging pool (unaligned/GPU buffers and short direct runs go through it)
      staging_slot_bytes  one staging slot
      ordered_staging_bytes  shared area for reads into GPU memory: a batch of >= 256 KiB is staged in batch
                          order (a host mirror of its destination) and copied by 256 KiB chunks, not one copy per
                          block; 0: off. A window that finds the area full goes through slots (stats(): staging_mode)
      io_bytes_max        contiguous runs are merged up to this many bytes per device request
      io_timeout_ms       a batch not complete by then raises OSError(ETIMEDOUT)
      direct_min_bytes    O_DIRECT runs shorter than this go through registered staging (cheaper than pinning
                          a fresh page per small request on virtual disks); 0: never
      low_latency         "auto" | "on" | "off": a worker with a shallow ring (a few requests) polls for their
                          completions instead of sleeping in the backend (bounded per wait); auto: on where the
                          process has CPUs to spare for it (workers + 2); stats() says what ran (latency_mode)
      direct              O_DIRECT; False goes through the page cache (file systems without O_DIRECT)
      writable            open devices read-write
      sqpoll, iopoll      uring: kernel submission polling; polled completions where the device supports it
      posix_threads       posix backend: pread/pwrite threads per worker queue
      lock                exclusive flock on every device (single writer; survives kill -9 safely)
      lock_wait_ms        how long to wait for another holder's lock before OSError(EWOULDBLOCK)
      sim                 backend "sim" (paths are names like "sim0"): dict(preset, device_bytes, paced,
                          backing_dir, channels, write_buffer_pages, seed, null, null_paced, latency_ns, link_mb_s);
                          GPUIO_SIM env overrides; null=True: zero-latency devices (no model, no data moved) to
                          measure the engine alone; null_paced=True: devices with a latency and a link rate of their
                          own (latency_ns, link_mb_s; 0: the preset's) but no model and no data moved on the host
                          (reads leave the buffers as they were), like drives that do their work in hardware
      fault               backend "fault:<backend>": dict(seed, eio_rate, short_rate, latency_rate, latency_us,
                          torn_write_rate, disappear_after, disappear_device, bytes_per_s)
      rbd                 backend "rbd" (paths "rbd:POOL[/NAMESPACE]/IMAGE", which select it): dict(conf, user,
                          keyring, exclusive, lock_wait_ms, break_lock, timeout_s, op_timeout_s); gpuio.volumes

    Thread safety: any thread may submit, wait, read, write and sync concurrently (batches are independent;
    the C++ engine serialises what it must). Batches that write the same blocks concurrently land in an
    unspecified order. close() must not race with calls still being made on the engine.
    """

    def __init__(self, paths: str | os.PathLike | Iterable[str | os.PathLike], *,
                 block_size: int = DEFAULTS["block_size"], stripe_bytes: int = DEFAULTS["stripe_bytes"],
                 backend: str = DEFAULTS["backend"], workers: int | None = DEFAULTS["workers"],
                 queue_depth: int = DEFAULTS["queue_depth"], staging_bytes: int = DEFAULTS["staging_bytes"],
                 staging_slot_bytes: int = DEFAULTS["staging_slot_bytes"],
                 ordered_staging_bytes: int = DEFAULTS["ordered_staging_bytes"], io_bytes_max: int = DEFAULTS["io_bytes_max"],
                 io_timeout_ms: int = DEFAULTS["io_timeout_ms"], direct_min_bytes: int = DEFAULTS["direct_min_bytes"],
                 low_latency: str = DEFAULTS["low_latency"],
                 direct: bool = DEFAULTS["direct"], writable: bool = DEFAULTS["writable"], sqpoll: bool = DEFAULTS["sqpoll"],
                 iopoll: bool = DEFAULTS["iopoll"], posix_threads: int = DEFAULTS["posix_threads"],
                 lock: bool = DEFAULTS["lock"], lock_wait_ms: int = DEFAULTS["lock_wait_ms"],
                 sim: dict | None = None, fault: dict | None = None, rbd: dict | None = None):
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        names: list[str] = [os.fspath(p) for p in paths]
        paths = names
        if not paths:
            raise ValueError("paths is empty: give at least one file or block device")
        if backend == "uring" and all(p.startswith("rbd:") and not os.path.exists(p) for p in names):
            backend = "rbd"  # Ceph volumes (gpuio.volumes): "rbd:POOL[/NAMESPACE]/IMAGE"
        opts = dict(block_size=block_size, stripe_bytes=stripe_bytes, backend=backend, workers=workers,
                    queue_depth=queue_depth, staging_bytes=staging_bytes, staging_slot_bytes=staging_slot_bytes,
                    ordered_staging_bytes=ordered_staging_bytes, io_bytes_max=io_bytes_max, io_timeout_ms=io_timeout_ms, direct_min_bytes=direct_min_bytes,
                    low_latency=low_latency,
                    direct=direct, writable=writable, sqpoll=sqpoll, iopoll=iopoll, posix_threads=posix_threads,
                    lock=lock, lock_wait_ms=lock_wait_ms, sim=sim, fault=fault, rbd=rbd)
        self._core = _core_module.EngineCore(paths, opts)
        self.paths = paths
        self.block_size = self._core.block_size
        self.backend = backend
        self._inflight: collections.deque[Handle] = collections.deque()
        self._inflight_lock = threading.Lock()
        self._gpu: GpuPath | None = None  # the CUDA layer (Engine.gpu), created on first use
        _open_engines.add(self)

    # -- properties -----------------------------------------------------------------------------------------
    @property
    def total_blocks(self) -> int:
        """Blocks of block_size the engine addresses (over every device, RAID-0 striped)."""
        return self._core.total_blocks

    @property
    def devices(self) -> list[dict]:
        """One dict per device: path, bytes, logical_block_bytes, direct, block_device."""
        return self._core.devices

    @property
    def closed(self) -> bool:
        """True after close()."""
        return self._core.closed

    # -- I/O ------------------------------------------------------------------------------------------------
    def _submit(self, op: int, blocks: Any, buf: Any) -> Handle:
        if self._core.closed:
            raise ValueError("engine is closed")
        # The binding checks both (dtype, shape, contiguity, memory, byte count) and names what is wrong
        # ("out" for a read, "src" for a write). 1-D contiguous int64 NumPy ids, and a one-element list of a
        # non-negative int, skip block_ids()' generic checks (4-8 us per call: most of a one-block read's Python
        # time on a loaded box): the engine range-checks every id before any I/O (IndexError naming the first
        # bad one).
        tb = type(blocks)
        if tb is np.ndarray and blocks.dtype == _INT64 and blocks.ndim == 1 and blocks.flags.c_contiguous:
            ids = blocks
        elif tb is list and len(blocks) == 1 and type(blocks[0]) is int and 0 <= blocks[0] <= _INT64_MAX:
            ids = np.array(blocks, dtype=_INT64)
        else:
            ids = block_ids(blocks)
        if type(buf) is np.ndarray:
            data, dev = buf, -1
        else:
            data = data_array(buf)
            dev = cuda_device(data)
        if dev < 0 and type(ids) is not np.ndarray:
            dev = cuda_device(ids)
        if dev >= 0:  # CUDA memory on either side: the GPU path, on that GPU (the data's where both are)
            return self.gpu.submit(op, ids, data, buf, dev)
        h = Handle(self._core.submit(op, ids, data), buf)
        with self._inflight_lock:  # submitters in several threads: check-then-pop must not interleave
            while self._inflight and self._inflight[0].done():
                self._inflight.popleft()
            self._inflight.append(h)
        return h

    # -- the CUDA layer -------------------------------------------------------------------------------------
    @property
    def gpu(self) -> "GpuPath":
        """This engine's GPU path (gpuio.gpu.GpuPath: stream-ordered reads and writes of CUDA memory, the
        device-API queues), created with the default GPU options on first use. RuntimeError naming the reason
        when gpuio was built without CUDA or no GPU is usable."""
        if self._gpu is None:
            self.attach_gpu()
        return self._gpu  # type: ignore[return-value]

    def attach_gpu(self, **options: Any) -> "GpuPath":
        """Create this engine's GPU path with non-default GPU options (gpuio.gpu.DEFAULTS: queues, copy,
        stream_wait, stream_copy, device_read, device, poll_spin_us, bounce_bytes, bounce_wait_ms, wait_timeout_s) and
        return it. device_read (device API, DeviceQueue::prefetch in CUDA kernels): auto (default: a read of at most
        16 KiB with nothing else pending on its DeviceQueue lands in host-mapped memory and the requesting block
        copies it itself, the one-block latency path) | batch (always the engine's staging->GPU copy); stats()
        reports device_read_mode. ValueError if the engine already has one (pass options before the first GPU
        request)."""
        if self._gpu is not None:
            raise ValueError("the engine already has its GPU path; pass GPU options before the first GPU request")
        from .gpu import GpuPath

        self._gpu = GpuPath(self, **options)
        return self._gpu

    def read_async(self, blocks: Any, out: Any) -> Handle:
        """Start reading blocks into out (len(blocks) * block_size bytes). The handle's wait() returns out.

        blocks: integer ids (int, list, range, integer array or tensor; ids in CUDA memory must be int64).
        out: any contiguous writable array of any dtype: a NumPy array, a CPU or CUDA tensor, a bytearray or
        memoryview (the binding takes it through DLPack or the buffer protocol and names what is wrong)."""
        return self._submit(READ, blocks, out)

    def write_async(self, blocks: Any, src: Any) -> Handle:
        """Start writing src (len(blocks) * block_size bytes) to blocks. src: as read_async's out, read-only
        memory (bytes, a read-only array) included."""
        return self._submit(WRITE, blocks, src)

    def wait_any(self, handles: Any, timeout: float | None = None) -> int:
        """Block until one of handles (this engine's, from read_async/write_async) is complete and return its
        index (the lowest when several are); its wait() then returns its result or raises its error. A caller
        keeping several batches in flight refills whichever ends first instead of waiting for them in order.
        timeout in seconds (None: the engine's io_timeout_ms), then OSError(ETIMEDOUT)."""
        hs = []
        for i, h in enumerate(handles):
            if not isinstance(h, Handle):
                raise TypeError(f"handles[{i}] must be a Handle from read_async/write_async, got {type(h).__name__}")
            hs.append(h._h)
        return _core_module.wait_any(hs, -1 if timeout is None else int(timeout * 1000))

    def read(self, blocks: Any, out: Any):
        """Read blocks into out and wait; returns out (read_async(...).wait())."""
        return self.read_async(blocks, out).wait()

    def write(self, blocks: Any, src: Any) -> None:
        """Write src to blocks and wait for the batch (write_async(...).wait())."""
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
            s.update(self._gpu.stats(s))
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
