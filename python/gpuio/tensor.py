"""`gpuio.TensorFile`: an on-disk tensor, stored as `.npy` with its data at a block boundary.

    tf = gpuio.TensorFile.create("feat.npy", (n, 128), "float32")
    tf.scatter(idx, rows)                 # write rows (read-modify-write of the blocks they touch)
    x = tf.gather(idx)                    # rows, on idx.device
    f = tf.prefetch(idx); ...; x = f.wait()  # gpuio.Future
    np.load("feat.npy", mmap_mode="r")    # still a valid .npy

Layout: the .npy header is padded so the data starts at `max(4096, block_size)`; rows are packed back to
back (NumPy's C order), several per block when smaller than a block; the file is padded to whole blocks
so every block can be read with O_DIRECT. A gather reads, through `gpuio.Engine`, each block that holds a
requested row exactly once (duplicates and neighbouring rows share blocks), then cuts the rows out of the
blocks with one strided `index_select` on the destination device.

Element types: torch dtypes and NumPy names alike (`torch.bfloat16`, "bfloat16", torch.float16, "float16",
np.float32, "int64", ...; gpuio._dtypes). float16 is NumPy's '<f2'. NumPy has no bfloat16: a bfloat16 file
stores the raw 16-bit words with descr '<u2' and the comment `# gpuio-dtype: bfloat16` after the header dict
(in its space padding, which NumPy's ast.literal_eval skips), so np.load gives the words as uint16
(`torch.from_numpy(a).view(torch.bfloat16)` recovers the values), gpuio gives bfloat16, and the data bytes
are the little-endian bfloat16 a safetensors-style reader expects. A uint16 file has no comment: uint16.
`tf.dtype` is the NumPy dtype of the stored elements (uint16 for bfloat16), `tf.torch_dtype` what gather
returns. Writes cast rows of any real dtype as torch's copy_ does; `scatter(..., exact=True)` refuses any
value the cast would change.
"""
from __future__ import annotations

import math
import os
import threading
import weakref

import numpy as np
import torch

from gpuio import outputs
from gpuio import engine as _engine_mod
from gpuio._blocklocks import READ_TRIES, BlockLocks
from gpuio._deprecated import renamed
from gpuio._dtypes import element_type, moved_as
from gpuio._forked import ForkAware, options_here
from gpuio.defaults import defaults_of
from gpuio import _rowplan
from gpuio._index import check_ids, row_ids
from gpuio._npy import format_header, read_header as read_npy_header
from gpuio.future import Future, deprecated_alias
from gpuio._tensor_writes import DATA_ALIGN_BYTES, TableWrites, _aligned_bytes, _table_policy

def npy_header(dtype, shape: tuple, data_offset: int) -> bytes:
    """The .npy header of a TensorFile of `dtype` (anything element_type takes; bfloat16 marked as such)."""
    et = element_type(dtype)
    return format_header(et.numpy, shape, data_offset, et.element)


def __getattr__(name: str):
    if name == "Prefetch":  # the old name of what prefetch returns, kept for one release
        return deprecated_alias("gpuio.tensor.Prefetch")
    raise AttributeError(f"module 'gpuio.tensor' has no attribute {name!r}")


def file_bytes(shape: tuple, dtype, block_size: int) -> int:
    """Size of a TensorFile of `shape` and `dtype` (any element type gpuio takes): the header up to the data
    offset, then the data padded to whole blocks (at least one)."""
    nbytes = math.prod(shape) * element_type(dtype).numpy.itemsize
    return max(DATA_ALIGN_BYTES, block_size) + max(block_size, -(-nbytes // block_size) * block_size)


def _release(target) -> None:
    """weakref.finalize of a TensorFile never closed: its target (and an engine of its own) close with it."""
    try:
        target.close()
    except Exception:  # noqa: BLE001 - at collection or exit there is no caller to tell
        pass


def _unpickle(path, mode, block_size, options, settings) -> "TensorFile":
    tf = TensorFile.open(path, mode, block_size=block_size, **options)
    path_ = settings.get("engine_gpu_path", settings.get("gpu_direct"))  # a pickle of the release before: gpu_direct
    tf.engine_gpu_path, tf.in_place_devices = path_, settings["in_place_devices"]
    return tf


class TensorFile(TableWrites, ForkAware):
    """Rows of an on-disk .npy tensor, read and written in blocks through `gpuio.Engine`.
    Use `TensorFile.create` / `TensorFile.open` (calling TensorFile(...) directly is refused).
    Indexing is torch-like: `tf[i]`, `tf[a:b:s]`, `tf[idx]` (idx of any shape: result idx.shape + row shape),
    `tf[idx, ...]` then indexes within rows; `tf[idx] = rows` writes (mode 'r+'), casting like torch.
    Also torch-like: ndim, dim(), numel(), size(), torch.as_tensor(tf) / np.asarray(tf) (the whole table).

    Thread safety: gather, prefetch, gather_pages, scatter and sync may be called from any number of
    threads at once. Scatters that touch the same block are serialised by striped block locks (rows that
    share a block never lose each other's writes); gathers take no lock and re-read when a scatter
    overlapped them, so every row a gather returns is one some scatter wrote whole (or the initial
    value), never a mix. Concurrent scatters of the *same* row land in an unspecified order. close() must
    not race with other calls. The locks belong to this object: two TensorFiles (or processes) writing
    one file are not coordinated. Durability: see sync()."""

    def __init__(self, *args, **kwargs):
        raise TypeError("TensorFile is not constructed directly: use TensorFile.open(path, mode='r'|'r+') for "
                        "an existing file or TensorFile.create(path, shape, dtype) for a new one")

    @classmethod
    def from_layout(cls, *args) -> "TensorFile":
        """A TensorFile over a header already read or written: (path, shape, dtype, data_offset, block_size,
        writable, engine_options), as create/open and the volume layer (gpuio.volumes) make them."""
        tf = cls.__new__(cls)
        tf._init(*args)
        return tf

    def _init(self, path, shape, dtype, data_offset, block_size, writable, engine_options):
        self._engine_options = dict(engine_options)  # as given: a fork or a pickle reopens with them
        self.path = os.fspath(path)
        self.shape = tuple(int(s) for s in shape)
        et = element_type(dtype)
        self.dtype = et.numpy  # as np.load reads the elements (uint16 words for bfloat16)
        self.torch_dtype = et.torch  # what gather returns and scatter stores
        self._moved = moved_as(et.torch)  # the same bytes, as a dtype every indexing kernel handles
        self._element = et
        self.block_size = block_size
        self.data_offset = data_offset
        self.writable = writable
        self.row_elems = math.prod(self.shape[1:])
        self.row_bytes = self.row_elems * self.dtype.itemsize
        self.nbytes = self.shape[0] * self.row_bytes
        self._base_block = data_offset // block_size
        # CUDA destinations: True reads them through the engine's GPU path (its workers copy each block from their
        # registered staging into GPU memory; no GPUDirect storage: the data crosses host memory), False into pinned
        # host memory and then one copy to the GPU; None: the engine's GPU path where gpuio was built with CUDA.
        self.engine_gpu_path = None
        # Distinct whole-block rows read in request order straight into the result ("in place", no cut)
        # for these destination device types; elsewhere blocks are read in ascending order and permuted
        # where the rows land. H200: to CUDA, sorted reads + a GPU permute ran ~1.5x in-place (see
        # docs/archive/results/RESULTS_cpu_devbox.md, "Gather rate"); to the host, in place saves a full copy.
        self.in_place_devices = ("cpu",)
        self._counters = dict(gathers=0, rows_gathered=0, blocks_read=0, scatters=0, rows_scattered=0,
                              blocks_written=0)
        self._closed = False
        self._open_engine()

    # -- construction -----------------------------------------------------------------------------
    @staticmethod
    def _check_block_size(block_size: int) -> None:
        from gpuio.engine import check_option  # the engine's own range check (C++), not a copy of it
        check_option("block_size", block_size)

    @classmethod
    def create(cls, path, shape, dtype="float32", block_size: int = _engine_mod.DEFAULTS["block_size"],
               overwrite: bool = False, **engine_options) -> "TensorFile":
        """New zero-filled file at `path`. An existing non-empty file is refused (FileExistsError) unless
        overwrite=True, a non-regular one (device, fifo, directory) always; the file system must have room for
        the whole file (OSError ENOSPC, nothing created), which is written under a temporary name and renamed
        when complete (gpuio.outputs). engine_options go to `gpuio.Engine` (direct=..., direct_min_bytes=... where host
        reads land in place or through staging)."""
        cls._check_block_size(block_size)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if not shape or any((not isinstance(s, (int, np.integer))) or s < 0 for s in shape):
            raise ValueError(f"shape must be a non-empty tuple of ints >= 0, got {shape!r}")
        et = element_type(dtype)
        offset = max(DATA_ALIGN_BYTES, block_size)
        size = file_bytes(shape, et, block_size)
        header = npy_header(et, shape, offset)
        with outputs.atomic_output(path, overwrite=overwrite, need_bytes=size) as tmp:
            with open(tmp, "r+b") as f:
                f.write(header)
                f.truncate(size)
        try:
            return cls.from_layout(path, tuple(int(s) for s in shape), et, offset, block_size, True, engine_options)
        except BaseException:
            os.unlink(os.path.realpath(path))  # the file this call made: an engine that cannot open it leaves nothing
            raise

    @classmethod
    def open(cls, path, mode: str = "r", block_size: int = _engine_mod.DEFAULTS["block_size"],
             **engine_options) -> "TensorFile":
        """Open a TensorFile ("r" read-only, "r+" read-write). Plain np.save files are refused (their
        data is not block aligned): convert them with `gpuio import`."""
        if mode not in ("r", "r+"):
            raise ValueError(f"mode must be 'r' or 'r+', got {mode!r}")
        cls._check_block_size(block_size)
        shape, fortran, stored, offset, element = read_npy_header(path)  # refuses what NumPy refuses, and more
        dtype = element_type(element or stored)
        if fortran:
            raise ValueError(f"{path}: Fortran-ordered arrays are not supported; save it C-ordered")
        if offset % block_size or offset < DATA_ALIGN_BYTES:
            raise ValueError(f"{path}: data starts at byte {offset}, not a multiple of block_size "
                             f"{block_size} >= {DATA_ALIGN_BYTES}; convert it with `gpuio import`")
        need = file_bytes(shape, dtype, block_size)
        if os.path.getsize(path) < need:
            if mode == "r":
                raise ValueError(f"{path}: file is {os.path.getsize(path)} bytes, a TensorFile of shape "
                                 f"{shape} needs {need} (padded to whole blocks); open with mode='r+'")
            os.truncate(path, need)
        engine_options.setdefault("writable", mode == "r+")
        return cls.from_layout(path, shape, dtype, offset, block_size, mode == "r+", engine_options)

    def _open_engine(self) -> None:
        """Open this file on an engine: by default as a target of the process engine (gpuio.default_engine(): its
        workers serve every file of the process); on engine=E as a target of E; with engine-wide options (workers=,
        backend=, queue_depth=, fault=, ...) or a block_size other than the process engine's, on an engine of its
        own. Per-file options (direct, writable, lock, lock_wait_ms) go to the target. direct unset: O_DIRECT,
        else (tmpfs refuses it) the page cache, and stats() says which."""
        self._locks = BlockLocks()  # scatter's read-modify-write of shared blocks; seqlock for gathers
        self._stats_lock = threading.Lock()
        self._row_buffers = threading.local()  # tf[i]'s O_DIRECT target, one per thread, reused
        options = options_here(dict(self._engine_options))
        options.setdefault("writable", self.writable)
        target = _engine_mod.open_files(self.path, block_size=self.block_size, own_defaults=dict(
            workers=_table_policy()["workers"]), **options)
        self.engine, self.target, self.direct, self._own_engine = target.engine, target, target.direct, target.owns_engine
        # The first data block as the engine numbers it (the file's blocks start at target.base_block).
        self._engine_base = self._base_block + target.base_block
        self._opened_here()
        # Dropped without close(): the target closes with the object (its fd, and its lock, do not linger).
        self._finalizer = weakref.finalize(self, _release, target)

    def _this_process(self) -> None:
        """After a fork the child has none of the engine's threads: reopen the file on this process's engine (the
        child's own process engine, or an engine of its own made with the same options), with fresh locks. ValueError
        once closed."""
        if self._closed:
            raise ValueError(f"TensorFile {self.path} is closed")
        ForkAware._this_process(self)

    def _after_fork(self) -> None:
        self._finalizer.detach()  # the parent's target is the parent's to close
        self._open_engine()

    def __reduce__(self):
        """Pickled as what it is (path, mode, block size, engine options, the few per-object settings); the
        receiving process opens the file again on its own engine (spawn/forkserver DataLoader workers, PyG loaders
        with workers, torch.multiprocessing ranks). engine= does not travel: the receiver's process engine serves."""
        options = {k: v for k, v in self._engine_options.items() if k != "engine"}
        settings = dict(engine_gpu_path=self.engine_gpu_path, in_place_devices=self.in_place_devices)
        return (_unpickle, (self.path, "r+" if self.writable else "r", self.block_size, options, settings))

    # -- properties ----------------------------------------------------------------------------------
    @property
    def num_rows(self) -> int:
        """shape[0]: the rows gather() and scatter() index."""
        return self.shape[0]

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def ndim(self) -> int:
        """len(shape), as torch's Tensor.ndim."""
        return len(self.shape)

    def dim(self) -> int:
        """len(shape), as torch's Tensor.dim()."""
        return len(self.shape)

    def numel(self) -> int:
        """The number of elements (the product of shape), as torch's Tensor.numel()."""
        return math.prod(self.shape)

    def size(self, dim: int | None = None):
        """torch.Size(shape), or the size of dimension `dim` (negative counts from the end), as torch's
        Tensor.size()."""
        if dim is None:
            return torch.Size(self.shape)
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"size(dim): dim must be an int, got {dim!r}")
        if not -self.ndim <= dim < self.ndim:
            raise IndexError(f"size(dim): dim {dim} is out of range for {self.ndim} dimensions "
                             f"(expected in [{-self.ndim}, {self.ndim - 1}])")
        return self.shape[dim]

    # -- whole-table conversions: torch.as_tensor(tf), torch.from_dlpack(tf), np.asarray(tf) --------------
    def _read_whole(self, why: str) -> torch.Tensor:
        """The table in host memory, one pass over its blocks: what a conversion means (np.asarray reads a
        memory-mapped .npy whole too). Conversions are implicit (NumPy functions, plotting, pandas call
        np.asarray), so a table larger than this machine's memory is refused in one line, not read."""
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        if self.nbytes > ram:
            raise MemoryError(f"{why} reads all of {self.path} ({self.nbytes} bytes) into memory, more than "
                              f"this machine's {ram} bytes: read rows with tf[a:b] or tf.gather(idx)")
        if self.nbytes == 0:
            return torch.zeros(self.shape, dtype=self.torch_dtype)
        blocks = torch.arange(-(-self.nbytes // self.block_size))
        buf = _aligned_bytes(blocks.numel() * self.block_size, pin=False)
        self._count(gathers=1, rows_gathered=self.num_rows)
        return self._consistent(blocks, lambda: self._read_into(blocks, buf), lambda: buf[:self.nbytes].view(
            self.torch_dtype).view(self.shape)).wait()

    def __dlpack__(self, **kwargs):
        """DLPack export of the whole table, read into host memory: `torch.as_tensor(tf)`,
        `torch.from_dlpack(tf)` (bfloat16 included). See _read_whole."""
        return self._read_whole("torch.as_tensor(TensorFile)").__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return torch.empty(0).__dlpack_device__()  # the CPU: the whole table is read into host memory

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """np.asarray(tf): the whole table, read into host memory (a new array: copy=False is refused). A
        bfloat16 table is refused (NumPy has no bfloat16): use torch.as_tensor(tf), or np.load for the
        stored uint16 words."""
        if copy is False:
            raise ValueError(f"np.asarray(TensorFile, copy=False): {self.path} is on disk; its rows can only "
                             f"be copied into memory")
        if self._element.element is not None:
            raise TypeError(f"np.asarray(TensorFile): NumPy has no {self._element.name}; use "
                            f"torch.as_tensor(tf) (or tf[:]) for {self._element.name} values, or "
                            f"np.load({self.path!r}) for the stored {self.dtype} words")
        out = self._read_whole("np.asarray(TensorFile)").numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return (f"gpuio.TensorFile({self.path!r}, shape={self.shape}, dtype={self._element.name}, "
                f"block_size={self.block_size}, direct={self.direct})")

    def stats(self) -> dict:
        """Counters of this file (gathers, rows, blocks and bytes read and written, data_path) and its engine's
        stats."""
        s = dict(self._counters, bytes_read=self._counters["blocks_read"] * self.block_size,
                 bytes_written=self._counters["blocks_written"] * self.block_size,
                 data_path="direct" if self.direct else "buffered")
        s["engine"] = self.engine.stats()
        return s

    def _count(self, **add) -> None:
        with self._stats_lock:
            for k, v in add.items():
                self._counters[k] += v

    def sync(self) -> None:
        """Make every scatter that has returned durable: fdatasync of the file (or the block device's
        flush), so it survives a crash or power loss. See README, "Durability"."""
        self._this_process()
        self.target.sync()

    def flush(self) -> None:
        """Same as sync(): scatter keeps no user-space buffer (its writes have reached the OS or the device
        when it returns), so the only flush left to do is the durable one."""
        self.sync()

    @property
    def engine_block_base(self) -> int:
        """The engine's id of this file's first data block: data block k (bytes [k * block_size, ...) after the
        header) is engine block engine_block_base + k, for requests made on self.engine directly (CUDA block ids, a
        raw reference beside the table). self.target takes the file's own block ids instead."""
        self._this_process()  # in a forked child: the ids of the child's own engine
        return self._engine_base

    @property
    def closed(self) -> bool:
        """True after close()."""
        return self._closed or self.target.closed

    def close(self) -> None:
        """sync() when opened writable (so a closed file's rows are durable), then close the file on its engine
        (an engine of its own stops; the process engine goes on serving the other files). Idempotent. In a forked
        child that never used the file, only forgets it (the parent's engine holds it)."""
        if self._closed:
            return
        self._closed = True
        if self._fork_gen != _engine_mod.fork_generation():
            return
        self._finalizer.detach()
        try:
            if self.writable and not self.target.closed:
                self.target.sync()
        finally:
            self.target.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- torch-like indexing -------------------------------------------------------------------------
    def __getitem__(self, key) -> torch.Tensor:
        """Rows as torch indexes them (see `row_ids`); a tuple key's first item picks rows, the rest (ints,
        slices, None, ...) index within them. Read through gather(): on the index tensor's device."""
        rest: tuple = ()
        if isinstance(key, tuple):
            key, rest = (key[0], key[1:]) if key else (slice(None), ())
            if key is None or key is Ellipsis or any(
                    not (r is None or r is Ellipsis or isinstance(r, (int, np.integer, slice))) for r in rest):
                raise TypeError(f"TensorFile index {key!r}, {rest!r}: the first item must pick rows and the "
                                f"others be ints, slices, None or ...; index the result for more")
        if type(key) is int and self.row_bytes:  # tf[i], a Dataset's __getitem__: one synchronous read, no planning
            n = self.num_rows
            if not -n <= key < n:
                raise IndexError(f"row {key} is out of range for {n} rows")
            row = self._one_row(key % n)
            return row[rest] if rest else row
        ids, lead = row_ids(key, self.num_rows)
        rows = self.gather(ids)
        rows = rows[0] if lead is None else rows.reshape(*lead, *self.shape[1:])
        return rows[(slice(None),) * (0 if lead is None else len(lead)) + rest] if rest else rows

    def __getitems__(self, ids) -> list[torch.Tensor]:
        """A DataLoader batch of rows: torch's fetcher calls this with the batch's indices (when batch_size is set)
        instead of one `tf[i]` a row, so the batch is one gather, its reads in flight together, and not
        len(ids) one-row reads one after another. The rows come back as a list (views of the gathered batch)
        for the loader's collate_fn."""
        return list(self.gather(torch.as_tensor(ids, dtype=torch.int64).reshape(-1)).unbind(0))

    def __setitem__(self, key, value) -> None:
        """`tf[rows] = values`: values broadcast to the indexed shape, cast to the file's dtype as torch
        casts on assignment, then written through scatter() (`scatter(..., exact=True)` refuses lossy
        values instead)."""
        if isinstance(key, tuple):
            raise TypeError("TensorFile assignment writes whole rows: use tf[rows] = values")
        ids, lead = row_ids(key, self.num_rows)
        target = (*(lead or ()), *self.shape[1:])
        vals = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
        try:
            vals = torch.broadcast_to(vals, target)
        except RuntimeError:
            raise ValueError(f"values of shape {tuple(vals.shape)} do not fit rows of shape {target}") from None
        self.scatter(ids.cpu(), vals.reshape(ids.numel(), *self.shape[1:]))

    # -- planning ------------------------------------------------------------------------------------
    def _index(self, idx) -> torch.Tensor:
        """Row ids as a flat int64 tensor (on idx's device), checked by gpuio._index.check_ids."""
        idx = check_ids(idx, "row ids", upper=self.num_rows)
        return (idx if isinstance(idx, torch.Tensor) else torch.from_numpy(idx)).flatten()

    def _plan(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _rowplan.plan(rows, self.row_bytes, self.block_size, self.dtype.itemsize)

    def _fully_covered(self, rows: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
        return _rowplan.fully_covered(rows, blocks, self.row_bytes, self.block_size, self.nbytes)

    def _extract(self, staging: torch.Tensor, pos: torch.Tensor, device) -> torch.Tensor:
        staging = staging.to(device, non_blocking=True)  # no-op where blocks were read onto the device
        elems = staging.view(self._moved)
        c = max(self.row_elems, 1)
        windows = elems.as_strided((elems.numel() - c + 1, c), (1, 1))  # row j = elements [j, j + c)
        out = windows.index_select(0, pos.to(device))
        return out.reshape((pos.numel(), *self.shape[1:])).view(self.torch_dtype)

    # -- I/O -----------------------------------------------------------------------------------------
    def _buffer(self, nbytes: int, device: torch.device) -> torch.Tensor:
        """Where blocks land: GPU memory when the engine's CUDA path exists (workers copy each extent from
        their registered staging to the GPU as it completes: no host staging here and no .to(device)
        after the last block); else 4 KiB-aligned host memory (pinned for a CUDA destination), which the
        engine fills by O_DIRECT in place for long runs and through its registered staging for short ones
        (Engine option direct_min_bytes: staging measured faster for 4 KiB reads on the GPU machine)."""
        if device.type == "cuda" and self._engine_gpu_path():
            return torch.empty(nbytes, dtype=torch.uint8, device=device)
        return _aligned_bytes(nbytes, pin=device.type == "cuda")

    def _engine_gpu_path(self) -> bool:
        if self.engine_gpu_path is None:
            try:
                from gpuio import _core
                self.engine_gpu_path = bool(_core.cuda_built)
            except ImportError:
                self.engine_gpu_path = False
        return self.engine_gpu_path

    @property
    def gpu_direct(self):
        """Deprecated name of engine_gpu_path (it never meant GPUDirect Storage)."""
        return renamed("TensorFile.gpu_direct", "TensorFile.engine_gpu_path", self.engine_gpu_path,
                       ": CUDA reads go through the engine's staging, not GPUDirect")

    @gpu_direct.setter
    def gpu_direct(self, value) -> None:
        renamed("TensorFile.gpu_direct", "TensorFile.engine_gpu_path", None,
                ": CUDA reads go through the engine's staging, not GPUDirect")
        self.engine_gpu_path = value

    def _read_into(self, blocks: torch.Tensor, buf: torch.Tensor) -> list:
        """Start reading data-relative `blocks` (in this order) into consecutive block-sized slots of buf."""
        ids = (blocks + self._engine_base).numpy()
        handles = []
        step = _table_policy()["batch_blocks_max"]
        for lo in range(0, ids.size, step):
            hi = min(lo + step, ids.size)
            handles.append(self.engine.read_async(ids[lo:hi], buf[lo * self.block_size:hi * self.block_size]))
        self._count(blocks_read=ids.size)
        return handles

    def _one_row(self, i: int) -> torch.Tensor:
        """Row i (0 <= i < num_rows) in host memory, read by this thread: Engine.read of the blocks it spans, which for
        a row of up to 128 KiB is one pread (from the page cache where it holds them) with no worker hand-off, into
        this thread's reused aligned buffer, then copied out (as np.memmap's row copy does). On a writable file a read
        a scatter overlapped is done again, as gathers do (seqlock)."""
        self._this_process()
        rb, bs = self.row_bytes, self.block_size
        start = i * rb
        first = start // bs
        nblk = (start + rb - 1) // bs - first + 1
        buf = getattr(self._row_buffers, "buf", None)
        if buf is None or buf.size < nblk * bs:
            from gpuio.engine import aligned_empty

            buf = self._row_buffers.buf = aligned_empty(max(nblk, 4) * bs, DATA_ALIGN_BYTES)
        view = buf[:nblk * bs]
        ids = np.arange(first + self._engine_base, first + self._engine_base + nblk, dtype=np.int64)
        if not self.writable:
            self.engine.read(ids, view)
        else:
            stripes = self._locks.stripes_of(ids - self._engine_base)
            for _ in range(READ_TRIES):
                before = self._locks.snapshot(stripes)
                self.engine.read(ids, view)
                if self._locks.unchanged(stripes, before):
                    break
            else:  # writers keep overlapping: read once with them locked out
                with self._locks.writing(stripes):
                    self.engine.read(ids, view)
        self._count(gathers=1, rows_gathered=1, blocks_read=nblk)
        off = start - first * bs
        if self._element.element is None:  # NumPy knows the dtype: one view, one copy
            return torch.from_numpy(view[off:off + rb].view(self.dtype).reshape(self.shape[1:]).copy())
        return torch.from_numpy(view[off:off + rb].copy()).view(self.torch_dtype).reshape(self.shape[1:])

    def prefetch(self, idx) -> Future:
        """Start reading rows `idx`; the future's wait() returns them on idx.device."""
        self._this_process()
        device = idx.device if isinstance(idx, torch.Tensor) else torch.device("cpu")
        rows = self._index(idx)
        self._count(gathers=1, rows_gathered=rows.numel())
        return self._prefetch_rows(rows, device)

    def _consistent(self, blocks: torch.Tensor, start, finish):
        """Run start() (which submits reads of data-relative `blocks`) and return a Future whose wait()
        gives finish(); on a writable file, a read that a scatter overlapped is done again (seqlock)."""
        if not self.writable:
            return Future.all_of(start(), finish)
        stripes = self._locks.stripes_of(blocks.numpy())
        before = self._locks.snapshot(stripes)  # before the reads start: a write in between is then seen
        handles = start()

        def checked(tries=1, before=before):
            while not self._locks.unchanged(stripes, before):
                if tries >= READ_TRIES:  # writers keep overlapping: read once with them locked out
                    with self._locks.writing(stripes):
                        for h in start():
                            h.wait()
                    return finish()
                before = self._locks.snapshot(stripes)
                for h in start():
                    h.wait()
                tries += 1
            return finish()
        return Future.all_of(handles, checked)

    def _prefetch_rows(self, rows: torch.Tensor, device) -> Future:
        if rows.numel() == 0 or self.row_bytes == 0:
            return Future.completed(torch.zeros((rows.numel(), *self.shape[1:]), dtype=self.torch_dtype,
                                                device=device))
        rows = rows.cpu()
        if self.row_bytes % self.block_size == 0:
            k = self.row_bytes // self.block_size
            blocks = (rows[:, None] * k + torch.arange(k)).flatten()
            if device.type in self.in_place_devices and torch.unique(rows).numel() == rows.numel():
                # Distinct whole-block rows: read them in request order straight into the result.
                out = self._buffer(rows.numel() * self.row_bytes, device)
                shape = (rows.numel(), *self.shape[1:])
                return self._consistent(blocks, lambda: self._read_into(blocks, out),
                                        lambda: out.view(self.torch_dtype).view(shape))
        blocks, pos = self._plan(rows)
        staging = self._buffer(blocks.numel() * self.block_size, device)
        return self._consistent(blocks, lambda: self._read_into(blocks, staging),
                                lambda: self._extract(staging, pos, device))

    def reads_in_place(self, device) -> bool:
        """True when reads bound for `device` land in request order (see in_place_devices)."""
        return torch.device(device).type in self.in_place_devices

    def pages_are_blocks(self, page_rows: int) -> bool:
        """True when `page_rows` rows fill exactly one block (rows never straddle blocks)."""
        return self.row_bytes > 0 and page_rows * self.row_bytes == self.block_size

    def gather_pages(self, pages, page_rows: int, device=None) -> torch.Tensor:
        """Pages of `page_rows` consecutive rows, [n, page_rows, ...] on `device`. When a page is exactly
        one block this reads the blocks straight into the result (no per-row cut); rows past the end of
        the table come back as zeros (file padding)."""
        if isinstance(page_rows, bool) or not isinstance(page_rows, int) or page_rows < 1:
            raise ValueError(f"page_rows must be an int >= 1, got {page_rows!r}")
        self._this_process()
        npages = -(-self.num_rows // page_rows)  # the last page may be partial (its tail reads as zeros)
        pages = check_ids(pages, "page ids", upper=npages)
        pages = (pages if isinstance(pages, torch.Tensor) else torch.from_numpy(pages)).flatten()
        device = torch.device(device) if device is not None else pages.device
        if not self.pages_are_blocks(page_rows):
            ids = (pages[:, None] * page_rows + torch.arange(page_rows, device=pages.device)).flatten()
            valid = ids < self.num_rows
            out = torch.zeros((ids.numel(), *self.shape[1:]), dtype=self._moved, device=device)
            out[valid.to(device)] = self.gather(ids[valid].cpu()).to(device).view(self._moved)
            return out.view(self.torch_dtype).view(pages.numel(), page_rows, *self.shape[1:])
        self._count(gathers=1, rows_gathered=pages.numel() * page_rows)
        if pages.numel() == 0:
            return torch.zeros((0, page_rows, *self.shape[1:]), dtype=self.torch_dtype, device=device)
        blocks = pages.cpu()
        staging = self._buffer(blocks.numel() * self.block_size, device)
        return self._consistent(blocks, lambda: self._read_into(blocks, staging), lambda: staging.to(
            device, non_blocking=True).view(self.torch_dtype).view(pages.numel(), page_rows, *self.shape[1:])).wait()

    def gather(self, idx) -> torch.Tensor:
        """Rows `idx` (integer tensor/array; duplicates and empty allowed) as a tensor on idx.device."""
        if self.row_bytes and not (isinstance(idx, torch.Tensor) and idx.device.type != "cpu"):
            self._this_process()
            ids = self._index(idx)  # checked once: the paths below take them as they are
            if ids.numel() == 1:  # one row into host memory: tf[i]'s synchronous inline read, no worker hand-off
                return self._one_row(int(ids[0])).reshape(1, *self.shape[1:])
            self._count(gathers=1, rows_gathered=ids.numel())
            return self._prefetch_rows(ids, torch.device("cpu")).wait()
        return self.prefetch(idx).wait()


__all__ = ["DATA_ALIGN_BYTES", "npy_header", "file_bytes", "TensorFile", "element_type", "read_npy_header"]
