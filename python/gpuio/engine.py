"""gpuio.Engine: batches of logical blocks to and from host (or, with the CUDA layer, GPU) memory.

    with gpuio.Engine("data.bin") as eng:
        out = np.empty(len(blocks) * 4096, np.uint8)
        eng.read(blocks, out)

Every knob's default, range, doc and name come from C++ (EngineOptions and its knob table, gpuio/knobs.hpp)
through gpuio.defaults, the one table of gpuio's knobs: DEFAULTS below is its engine part, and values are checked
in C++, once. Errors name the offending value:
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

from . import defaults as _defaults
from ._buffers import block_ids, cuda_device, data_array
from .future import Future, deprecated_alias

if TYPE_CHECKING:
    from .gpu import GpuRuntime

try:
    from . import _core as _core_module
except ImportError as e:  # pragma: no cover - a source checkout without the compiled module
    raise ImportError(f"gpuio's compiled core (gpuio._core) is missing: build it (scripts/setup.sh) ({e})") from e

# The defaults of every Engine keyword, as C++ sets them (EngineOptions): a view of gpuio.defaults' engine rows.
DEFAULTS: dict = _defaults.defaults_of("engine")
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

def auto_workers(devices: int = 1) -> dict:
    """What workers=0 (the default) gives an engine over `devices` devices in this process: "threads", the worker
    threads it starts (from the CPUs this process may use), and "start", the count its controller begins with."""
    return dict(_core_module.auto_workers(devices))


# Engines still open when the interpreter exits are closed first: their worker and control-plane threads
# must stop before C++ static destructors and the CUDA runtime's teardown run under them.
_open_engines: "weakref.WeakSet[Engine]" = weakref.WeakSet()

# The process engine (default_engine()), made on first use. A forked child starts without one: the parent's engine
# object is inherited but none of its threads are, so the child's objects reopen their files on an engine of its
# own (fork_generation() tells them a fork happened). Engines inherited that way are kept here, never closed by
# the child's Python (the C++ side abandons them: nothing of the parent's is joined, locked or freed).
_default: "Engine | None" = None
_default_lock = threading.Lock()
_fork_generation = 0
_inherited: list = []


def fork_generation() -> int:
    """How many forks separate this process from the one that imported gpuio first (0 there). Objects that hold
    an engine compare it with the value they saw when they opened it, and reopen after a fork."""
    return _fork_generation


def _after_fork_in_child() -> None:
    global _default, _default_lock, _fork_generation
    _fork_generation += 1
    _inherited.extend(_open_engines)
    _open_engines.clear()
    _default = None
    _default_lock = threading.Lock()  # a parent thread may have held it at the fork
    # torch's intra-op threads (GNU OpenMP) do not survive a fork either: the child's first parallel op (a
    # TensorFile scatter's index_copy_, say) would wait forever for the parent's team. One thread, as PyTorch's own
    # DataLoader workers run.
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() > 1:
        torch.set_num_threads(1)


os.register_at_fork(after_in_child=_after_fork_in_child)

# The per-file knobs (a target's direct, writable, lock, lock_wait_ms, stripe_bytes); the rest are engine-wide, each a
# process-wide setting of gpuio.defaults (GPUIO_<NAME>, defaults.set()), read when gpuio makes an engine.
_TARGET_KEYS = tuple(k.key for k in _defaults.knobs("engine") if k.per_target)


def process_engine_options() -> dict:
    """The options the engines gpuio makes itself are made with (the process engine, and open_files' own engines
    for what their caller leaves out): every engine-wide knob's value in force (gpuio.defaults.get: set(), else
    GPUIO_<NAME>, else C++'s default). ValueError naming the variable for a value that does not parse or fit."""
    opts = {k.key: _defaults.get(k.name) for k in _defaults.knobs("engine") if k.env is not None}
    if opts["workers"] == 0:
        opts["workers"] = None  # dynamic: the controller sizes the workers for the whole process
    return opts


def _process_engine_keeps(values: dict) -> None:
    """defaults.set() hook: a running process engine keeps the options it was made with; say so."""
    eng = _default
    if eng is None or eng.closed:
        return
    running = dict(eng._options, workers=eng._options.get("workers") or 0)
    kept = {k: running[k] for k in values if k in running and running[k] != values[k]}
    if kept:
        import warnings

        warnings.warn(f"gpuio.defaults.set: the process engine is already running with {kept}; the new values apply "
                      f"to engines made from now on (once what uses it is closed, gpuio.default_engine().close() lets "
                      f"the next use remake it)",
                      RuntimeWarning, stacklevel=3)


_defaults.on_set(_process_engine_keeps)


def default_engine() -> "Engine":
    """The process's engine, made on first use (options: process_engine_options()) and shared by every
    TensorFile, table cache, stream store, device array and graph file of the process that names no engine of its
    own: one set of worker threads, staging and controller whatever the number of open files. After a fork the
    child gets its own on first use."""
    global _default
    eng = _default
    if eng is not None and not eng.closed:
        return eng
    with _default_lock:
        if _default is None or _default.closed:
            _default = Engine(None, **process_engine_options())
            _default._is_default = True
        return _default


@atexit.register
def _close_open_engines() -> None:
    for eng in list(_open_engines):
        try:
            eng.close()
        except Exception as e:  # noqa: BLE001 - say it, but let the other engines close too
            print(f"gpuio: closing {eng!r} at exit failed: {e}", file=sys.stderr)


def __getattr__(name: str):
    if name == "Handle":  # the old name of what read_async/write_async return, kept for one release
        return deprecated_alias("gpuio.engine.Handle")
    raise AttributeError(f"module 'gpuio.engine' has no attribute {name!r}")


class Engine:
    """CPU-managed I/O engine over one device or RAID-0 stripes of several (files or block devices).

    Thread safety: any thread may submit, wait, read, write and sync concurrently (batches are independent;
    the C++ engine serialises what it must). Batches that write the same blocks concurrently land in an
    unspecified order. close() must not race with calls still being made on the engine.

    Keywords (gpuio.defaults' engine rows, from C++: default, range, and the variable that sets it for the engines
    gpuio makes itself; a value out of range is a ValueError naming the keyword):
    """

    def __init__(self, paths: str | os.PathLike | Iterable[str | os.PathLike] | None, *,
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
        if paths is None:  # a shared engine: files come as targets (open_target)
            paths = []
            if backend not in ("uring", "posix"):
                raise ValueError(f"an engine without paths opens its files later (open_target), which only the "
                                 f"uring and posix backends do; backend={backend!r} needs its paths now")
        elif isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        else:
            paths = [os.fspath(p) for p in paths]
            if not paths:
                raise ValueError("paths is empty: give at least one file or block device (or paths=None for an "
                                 "engine that opens its files later)")
        names: list[str] = [os.fspath(p) for p in paths]
        paths = names
        if backend == "uring" and names and all(p.startswith("rbd:") and not os.path.exists(p) for p in names):
            backend = "rbd"  # Ceph volumes (gpuio.volumes): "rbd:POOL[/NAMESPACE]/IMAGE"
        given = locals()
        opts = {k: given[k] for k in DEFAULTS}  # every keyword (the table's engine rows), as given or defaulted
        self._core = _core_module.EngineCore(paths, opts)
        self._options = {k: v for k, v in opts.items() if v is not None or k == "workers"}
        self._pid = os.getpid()
        self._gen = _fork_generation
        self._is_default = False
        self.paths = paths
        self.block_size = self._core.block_size
        self.backend = backend
        self._inflight: collections.deque[Future] = collections.deque()
        self._inflight_lock = threading.Lock()
        self._gpu: GpuRuntime | None = None  # the CUDA layer (Engine.gpu), created on first use
        # Threads whose first requests into CUDA memory come at once make it once: two would each register the
        # engine's staging with CUDA (cudaErrorHostMemoryAlreadyRegistered) and run two copy paths.
        self._gpu_lock = threading.RLock()
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

    @property
    def core(self):
        """The C++ engine (gpuio._core.EngineCore): for gpuio's GPU path, device arrays and benchmarks."""
        return self._core

    @property
    def inherited(self) -> bool:
        """True in a forked child for an engine made by the parent (none of its threads run here)."""
        return self._gen != _fork_generation

    @property
    def gpu_attached(self) -> bool:
        """True once the engine has its GPU path (Engine.gpu made it, or attach_gpu)."""
        return self._gpu is not None

    # -- I/O ------------------------------------------------------------------------------------------------
    def _args(self, blocks: Any, buf: Any) -> tuple:
        """(ids, data, dev): the ids and the buffer as the binding takes them, and the CUDA device either is on
        (-1: host memory on both sides)."""
        if self._core.closed:
            raise ValueError("engine is closed")
        if self._gen != _fork_generation:
            self._check_process()
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
        return ids, data, dev

    def _submit(self, op: int, blocks: Any, buf: Any) -> Future:
        ids, data, dev = self._args(blocks, buf)
        if dev >= 0:  # CUDA memory on either side: the GPU path, on that GPU (the data's where both are)
            return self.gpu.submit(op, ids, data, buf, dev)
        h = Future(self._core.submit(op, ids, data), buf)
        with self._inflight_lock:  # submitters in several threads: check-then-pop must not interleave
            while self._inflight and self._inflight[0].done():
                self._inflight.popleft()
            self._inflight.append(h)
        return h

    # -- the CUDA layer -------------------------------------------------------------------------------------
    @property
    def gpu(self) -> "GpuRuntime":
        """This engine's GPU path (gpuio.gpu.GpuRuntime: stream-ordered reads and writes of CUDA memory, the
        device-API queues), created with the default GPU options on first use. RuntimeError naming the reason
        when gpuio was built without CUDA or no GPU is usable."""
        if self._gpu is None:
            with self._gpu_lock:
                if self._gpu is None:
                    self._make_gpu({})
        return self._gpu  # type: ignore[return-value]

    def attach_gpu(self, **options: Any) -> "GpuRuntime":
        """Create this engine's GPU path with non-default GPU options (gpuio.defaults' gpu rows, below; the ones not
        given take their process-wide values, gpuio.defaults.get("gpu.<name>")) and return it. ValueError if the
        engine already has one (pass options before the first GPU request). Options:"""
        with self._gpu_lock:
            if self._gpu is not None:
                raise ValueError("the engine already has its GPU path; pass GPU options before the first GPU request")
            return self._make_gpu(options)

    def _make_gpu(self, options: dict) -> "GpuRuntime":
        """Under _gpu_lock."""
        self._check_process()
        from .gpu import GpuRuntime, refuse_bad_fork

        refuse_bad_fork()

        self._gpu = GpuRuntime(self, **options)
        return self._gpu

    def read_async(self, blocks: Any, out: Any) -> Future:
        """Start reading blocks into out (len(blocks) * block_size bytes). The future's wait() returns out; without
        a timeout it waits at most the engine's io_timeout_ms.

        blocks: integer ids (int, list, range, integer array or tensor; ids in CUDA memory must be int64).
        out: any contiguous writable array of any dtype: a NumPy array, a CPU or CUDA tensor, a bytearray or
        memoryview (the binding takes it through DLPack or the buffer protocol and names what is wrong)."""
        return self._submit(READ, blocks, out)

    def write_async(self, blocks: Any, src: Any) -> Future:
        """Start writing src (len(blocks) * block_size bytes) to blocks (the future's wait() returns None). src:
        as read_async's out, read-only memory (bytes, a read-only array) included."""
        return self._submit(WRITE, blocks, src)

    def wait_any(self, futures: Any, timeout: float | None = None) -> int:
        """Block until one of futures (this engine's, from read_async/write_async) is complete and return its
        index (the lowest when several are); its wait() then returns its result or raises its error. A caller
        keeping several batches in flight refills whichever ends first instead of waiting for them in order.
        timeout in seconds (None: the engine's io_timeout_ms), then OSError(ETIMEDOUT)."""
        batches = []
        for i, f in enumerate(futures):
            work = f.work if isinstance(f, Future) else None
            if not isinstance(work, _core_module.BatchHandle):
                raise TypeError(f"futures[{i}] must be a gpuio.Future of an engine batch (read_async/write_async "
                                f"of host memory), got {type(f).__name__}")
            batches.append(work)
        return _core_module.wait_any(batches, -1 if timeout is None else int(timeout * 1000))

    def read(self, blocks: Any, out: Any):
        """Read blocks into out and wait; returns out. Into host memory one contiguous run of at most
        limits.hpp's inline_bytes_max (128 KiB: a table row) is read by this thread, from the page cache where it
        holds the run (stats: inline_ops, inline_cached_ops), with no hand-off to a worker; anything else is
        read_async(...).wait()."""
        ids, data, dev = self._args(blocks, out)
        if dev >= 0:
            return self.gpu.submit(READ, ids, data, out, dev).wait()
        self._core.read(ids, data)
        return out

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
        """Finish the batches in flight, stop the workers. Idempotent. In a forked child an engine inherited from
        the parent is only marked closed (its threads and GPU state are the parent's)."""
        if self._gen != _fork_generation:
            self._core.close()  # C++ abandons it: nothing joined, freed or synchronised
            return
        if self._gpu is not None:  # stops taking GPU requests first; it closes the engine core too
            self._gpu.close()
        if not self._core.closed:
            self._core.close()
        self._inflight.clear()

    def _check_process(self) -> None:
        if self._gen != _fork_generation:
            raise RuntimeError(f"{self!r} belongs to process {self._pid}, and this process ({os.getpid()}) is a "
                               f"fork of it without its worker threads: open the file again here (TensorFile and "
                               f"the other gpuio objects do so on their own; gpuio.default_engine() is this "
                               f"process's engine)")

    # -- targets: files opened on a running engine -------------------------------------------------------------
    def open_target(self, paths: str | os.PathLike | Iterable[str | os.PathLike], *, direct: bool = DEFAULTS["direct"],
                    writable: bool = DEFAULTS["writable"], lock: bool = DEFAULTS["lock"],
                    lock_wait_ms: int = DEFAULTS["lock_wait_ms"],
                    stripe_bytes: int = DEFAULTS["stripe_bytes"]) -> "Target":
        """Open a file (or a RAID-0 set of several) on this engine as a Target: its blocks are addressed from 0 like
        an engine of its own, but the engine's workers, staging and controller serve it with every other target.
        Only the uring and posix backends open files while they run. OSError naming the path when it cannot be
        opened (O_DIRECT refused: pass direct=False)."""
        self._check_process()
        if self._core.closed:
            raise ValueError("engine is closed")
        names = [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else [os.fspath(p) for p in paths]
        info = self._core.open_target(names, dict(direct=direct, writable=writable, lock=lock,
                                                  lock_wait_ms=lock_wait_ms, stripe_bytes=stripe_bytes))
        return Target(self, names, info, dict(direct=direct, writable=writable, lock=lock,
                                             lock_wait_ms=lock_wait_ms, stripe_bytes=stripe_bytes))

    def first_target(self) -> "Target":
        """The files this engine was made with, as a Target (block ids from 0: the same as the engine's)."""
        if not self.paths:
            raise ValueError("this engine was made without paths: it has no first target (use open_target)")
        keys = ("direct", "writable", "lock", "lock_wait_ms", "stripe_bytes")
        return Target(self, self.paths, dict(id=0, base_block=0, blocks=self.total_blocks, devices=self.devices),
                      {k: self._options.get(k, DEFAULTS[k]) for k in keys})

    @property
    def target_count(self) -> int:
        """Targets open on this engine now (an engine made with paths counts them as its first)."""
        return self._core.target_count

    def __reduce__(self):
        """Pickled as what it is: the process engine (the receiver's own default_engine()), or paths and options
        (the receiver opens its own engine over them; batches in flight do not travel)."""
        if self._is_default:
            return (default_engine, ())
        if not self.paths:
            raise TypeError("an engine without paths travels only as the process engine (gpuio.default_engine())")
        return (_reopen_engine, (self.paths, self._options))

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.total_blocks} blocks"
        what = "the process engine" if self._is_default else repr(self.paths)
        return f"gpuio.Engine({what}, block_size={self.block_size}, backend={self.backend!r}, {state})"

    @staticmethod
    def create_file(path: str | os.PathLike, nbytes: int) -> None:
        """Create (or extend) a file of nbytes to use as a device."""
        if not isinstance(nbytes, int) or nbytes <= 0:
            raise ValueError(f"nbytes must be a positive int, got {nbytes!r}")
        _core_module.EngineCore.create_file(os.fspath(path), nbytes)


Engine.__doc__ = (Engine.__doc__ or "") + _defaults.keyword_doc("engine") + "\n"
Engine.attach_gpu.__doc__ = (Engine.attach_gpu.__doc__ or "") + "\n\n" + _defaults.keyword_doc("gpu", indent=8) + "\n"


def open_files(paths: str | os.PathLike | Iterable[str | os.PathLike], *, block_size: int = DEFAULTS["block_size"],
               engine: "Engine | None" = None, direct: bool | None = None, own_defaults: dict | None = None,
               **options: Any) -> "Target":
    """Open a file (or a RAID-0 set) the way gpuio's objects do: as a target of the process engine (default_engine())
    by default; of `engine` when given; on an engine of its own (closed with the target) when engine-wide options
    are given (workers=, backend=, queue_depth=, fault=, sim=, ...) or block_size differs from the process engine's,
    with own_defaults, then the process-wide values (process_engine_options()), filling in what they leave out.
    Per-file options: writable, lock, lock_wait_ms, stripe_bytes. direct=None:
    O_DIRECT, else (tmpfs refuses it) the page cache; target.direct says which."""
    per_file = {k: options.pop(k) for k in _TARGET_KEYS if k in options and k != "direct"}
    own = engine is None and (bool(options) or block_size != _defaults.get("block_size"))
    if engine is not None and options:
        raise TypeError(f"engine= is given, so the engine options {sorted(options)} have no effect: set them on "
                        f"that engine")
    if own:
        wide = {k: v for k, v in process_engine_options().items() if k != "block_size"}
        options = {**wide, **(own_defaults or {}), **options}
    shared = engine if engine is not None else None if own else default_engine()
    if shared is not None and shared.block_size != block_size:
        raise ValueError(f"block_size={block_size} differs from the engine's block_size={shared.block_size}")

    def attempt(d: bool) -> Target:
        if shared is not None:
            return shared.open_target(paths, direct=d, **per_file)
        target = Engine(paths, block_size=block_size, direct=d, **per_file, **options).first_target()
        target.owns_engine = True
        return target
    if direct is not None:
        return attempt(direct)
    try:
        return attempt(True)
    except OSError:  # e.g. tmpfs refuses O_DIRECT (EINVAL): go through the page cache, and say so
        return attempt(False)


def _reopen_engine(paths: list, options: dict) -> Engine:
    return Engine(paths, **options)


class Target:
    """A file (or RAID-0 set) open on a running Engine (Engine.open_target): block ids 0..total_blocks-1 of this
    file, served by the engine's shared workers. read/write/read_async/write_async take the same buffers as the
    Engine's and check that every id lies in this file (IndexError otherwise: never another file's block)."""

    def __init__(self, engine: Engine, paths: list, info: dict, options: dict):
        self.engine = engine
        self.paths = paths
        self.id: int = info["id"]
        self.base_block: int = info["base_block"]
        self.total_blocks: int = info["blocks"]
        self.devices: list = info["devices"]
        self.block_size = engine.block_size
        self.options = options
        self.direct: bool = options["direct"]
        self.writable: bool = options["writable"]
        self.owns_engine = False  # open_files made the engine for this target alone: they close together
        self._closed = False

    @property
    def closed(self) -> bool:
        """True after close() (or once its engine closed)."""
        return self._closed or self.engine.closed

    def engine_ids(self, blocks: Any) -> Any:
        """This file's block ids as the engine's (host ids; checked to lie in the file)."""
        ids = block_ids(blocks)
        if cuda_device(ids) >= 0:
            raise TypeError("a Target takes block ids in host memory (CUDA ids: use the engine with "
                            "target.base_block added)")
        arr = ids.numpy() if not isinstance(ids, np.ndarray) else ids
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.total_blocks):
            bad = int(arr.min()) if int(arr.min()) < 0 else int(arr.max())
            raise IndexError(f"block {bad} is out of range [0, {self.total_blocks}) of {self.paths[0]}")
        return arr + self.base_block

    def read_async(self, blocks: Any, out: Any) -> Future:
        """Start reading this file's blocks into out (as Engine.read_async)."""
        return self.engine.read_async(self.engine_ids(blocks), out)

    def write_async(self, blocks: Any, src: Any) -> Future:
        """Start writing src to this file's blocks (as Engine.write_async)."""
        return self.engine.write_async(self.engine_ids(blocks), src)

    def read(self, blocks: Any, out: Any):
        """Read this file's blocks into out and wait; returns out."""
        return self.read_async(blocks, out).wait()

    def write(self, blocks: Any, src: Any) -> None:
        """Write src to this file's blocks and wait."""
        self.write_async(blocks, src).wait()

    def sync(self) -> None:
        """fdatasync this file's devices (not the engine's other files)."""
        if self.closed:
            raise ValueError(f"target {self.paths[0]} is closed")
        self.engine._check_process()
        self.engine._core.sync_target(self.id)

    def stats(self) -> dict:
        """The engine's stats (shared by every target on it)."""
        return self.engine.stats()

    def close(self) -> None:
        """Refuse this file's blocks from now on, let its batches in flight end, close its devices. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.owns_engine:
            self.engine.close()
        elif not self.engine.closed:
            self.engine._core.close_target(self.id)

    def __enter__(self) -> "Target":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"blocks {self.base_block}..{self.base_block + self.total_blocks - 1}"
        return f"gpuio.Target({self.paths!r}, {state} of {self.engine!r})"

__all__ = ["DEFAULTS", "check_option", "READ", "WRITE", "ALIGN_BYTES", "aligned_empty", "auto_workers",
           "fork_generation", "process_engine_options", "default_engine", "Engine", "open_files", "Target"]
