"""`gpuio.DeviceArray`: a BaM-style array of N elements on storage, read (and written) element-wise through a
page cache — on the GPU (kernels in cpp/include/gpuio/array.cuh) or on the host (the same algorithm,
HostArrayCache in cpp/include/gpuio/array_cache.hpp).

    a = gpuio.DeviceArray.create("col.npy", n, "int32", cache_bytes=1 << 30)      # or DeviceArray(tf, ...)
    a[torch.tensor([5, 17, 5], device="cuda")]    # elements, on the array's device
    a[idx] = vals                                 # cached; written back on eviction or a.flush()
    a.stats()                                     # hits, misses, hit_rate, page_reads, page_writes, ...

The cache is set-associative (sets x ways pages of page_bytes, page p in set p % sets, CLOCK within the set).
A warp (the host replays the same 32-access groups) coalesces its misses into one engine request per round;
on the GPU the engine reads them into host-mapped pinned memory and the waiting warp copies them into the
cache itself, so no kernel waits on a CUDA call of a host thread. Consistency: one DeviceArray owns its
blocks while open (single writer; nobody else may write them); writes reach storage on eviction or flush();
flush/stats/invalidate run between kernels. Kernels of your own take `ref_bytes()` (the C++ ArrayRef, by
value) and use `gpuio::DeviceArray<T>`.

Other processes: a DeviceArray pickles as its file and cache geometry (flushing first, so the receiver reads every
write made before); the receiver opens the file and an empty cache of its own on the same kind of device. In a
forked child a host-cached array reopens its file on the child's engine with an empty cache on first use; one
cached on CUDA refuses at once (gpuio.gpu.BAD_FORK). Caches are per process: neither sees the other's unflushed
writes (flush() in the writer, invalidate() in the reader).
"""
from __future__ import annotations

import errno
import math
import os

import numpy as np
import torch

from .defaults import defaults_of
from ._dtypes import element_type, stored_numpy
from ._forked import ForkAware
from .engine import fork_generation

# DeviceArray's keywords: a view of gpuio.defaults' array rows (cache_bytes, ways, staging_groups, round_bytes from
# C++'s array_cache.hpp; page_bytes=None: the store's block size, else a power of two of 1..16 blocks).
DEFAULTS = defaults_of("array")
_BLOCK_SIZE = defaults_of("engine")["block_size"]
ELEM_BYTES = (1, 2, 4, 8)


def _core():
    from . import _core as core

    return core


def _resolve_device(device) -> torch.device:
    if device is None:
        try:
            built = bool(_core().cuda_built)
        except ImportError:
            built = False
        return torch.device("cuda" if built and torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device={device!r} is not a device name (use 'cuda', 'cuda:1' or 'cpu')") from None
    if dev.type not in ("cuda", "cpu"):
        raise ValueError(f"device={device!r}: a DeviceArray caches on 'cuda' or 'cpu'")
    if dev.type == "cuda":
        if not _core().cuda_built:
            raise RuntimeError(f"device={device!r} but gpuio was built without the CUDA layer")
        if not torch.cuda.is_available():
            raise RuntimeError(f"device={device!r} but torch sees no CUDA device")
    return dev


class DeviceArray(ForkAware):
    """Elements of a TensorFile (flattened, C order) behind a page cache on `device`. See the module doc."""

    def __init__(self, source, cache_bytes: int = DEFAULTS["cache_bytes"], *, page_bytes: int | None = None,
                 ways: int = DEFAULTS["ways"], device=None, staging_groups: int = DEFAULTS["staging_groups"]):
        from .tensor import TensorFile

        if not isinstance(source, TensorFile):
            raise TypeError(f"source must be a gpuio.TensorFile, got {type(source).__name__}")
        self.file = source
        self.dtype = source.dtype
        self.torch_dtype = source.torch_dtype
        if self.dtype.itemsize not in ELEM_BYTES:
            raise ValueError(f"dtype {self.dtype} has {self.dtype.itemsize}-byte elements; DeviceArray takes "
                             f"{', '.join(map(str, ELEM_BYTES))}-byte elements")
        bs = source.block_size
        page_bytes = bs if page_bytes is None else page_bytes
        if not isinstance(page_bytes, int) or page_bytes < bs or page_bytes & (page_bytes - 1) or page_bytes > 16 * bs:
            raise ValueError(f"page_bytes={page_bytes!r} must be a power of two of 1..16 blocks of {bs} bytes")
        if not isinstance(cache_bytes, int) or cache_bytes < page_bytes:
            raise ValueError(f"cache_bytes={cache_bytes!r} must be an int >= page_bytes={page_bytes}")
        if not isinstance(ways, int) or not 1 <= ways <= 255:
            raise ValueError(f"ways={ways!r} must be an int in [1, 255]")
        if not isinstance(staging_groups, int) or staging_groups < 1:
            raise ValueError(f"staging_groups={staging_groups!r} must be an int >= 1")
        self.device = _resolve_device(device)
        slots = cache_bytes // page_bytes
        self.ways = min(ways, slots)
        self.sets = slots // self.ways
        self.page_bytes = page_bytes
        self.cache_bytes = self.sets * self.ways * page_bytes
        self.n = math.prod(source.shape)
        self.round_pages = max(1, min(32, DEFAULTS["round_bytes"] // page_bytes))
        self.staging_groups = staging_groups
        self.geometry = dict(n_elems=self.n, elem_bytes=self.dtype.itemsize, page_bytes=page_bytes, block_bytes=bs,
                             base_block=source.engine_block_base, sets=self.sets, ways=self.ways,
                             round_pages=self.round_pages)
        self._make_cache()
        self._closed = False

    def _make_cache(self) -> None:
        """An empty cache over the file as this process's engine holds it."""
        self.geometry["base_block"] = self.file.engine_block_base  # first: after a fork it reopens the file here
        eng = self.file.engine
        if self.device.type == "cuda":
            with torch.cuda.device(self.device):
                path = eng.gpu
                queues = [list(path.queue(i)) for i in range(path.options["queues"])]
                self._c = _core().GpuArrayCache(eng.core, queues, self.geometry, self.staging_groups)
        else:
            self._c = _core().HostArrayCache(eng.core, self.geometry)
        self._opened_here()

    def _after_fork(self) -> None:
        self._make_cache()  # the file on this process's engine (engine_block_base reopens it), a cache of our own

    def _here(self) -> None:
        """ValueError once closed; BAD_FORK at once for a CUDA cache in a forked child; else, after a fork, this
        process's own file and cache."""
        if self._closed:
            raise ValueError("DeviceArray is closed")
        if self.device.type == "cuda":
            from .gpu import refuse_bad_fork
            refuse_bad_fork()
        self._this_process()

    def __reduce__(self):
        """Pickled as its file and cache geometry (see the module docstring); a writable array flushes first."""
        self._here()
        if self.file.writable:
            self.flush()
        return (_arrive, (self.file, self.cache_bytes, self.page_bytes, self.ways, str(self.device),
                          self.staging_groups))

    # -- construction ---------------------------------------------------------------------------------
    @classmethod
    def create(cls, path, n: int, dtype="float32", cache_bytes: int = DEFAULTS["cache_bytes"], *,
               block_size: int = _BLOCK_SIZE, page_bytes: int | None = None, fill=None, **options) -> "DeviceArray":
        """A new array file of n elements (zeros, or `fill`: an array-like of n values written first)."""
        from .tensor import TensorFile

        if not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n={n!r} must be an int >= 1")
        array_opts = {k: options.pop(k) for k in ("ways", "device", "staging_groups") if k in options}
        tf = TensorFile.create(path, (int(n),), dtype, block_size=block_size, **options)
        if fill is not None:
            et = element_type(tf.torch_dtype)
            if et.element is None:
                vals = np.ascontiguousarray(fill, dtype=tf.dtype).reshape(-1)
            else:  # NumPy lacks the type (bfloat16): cast in torch, write the stored words
                fill = fill if isinstance(fill, torch.Tensor) else torch.as_tensor(np.asarray(fill))
                vals = stored_numpy(fill.to("cpu", et.torch).contiguous(), et).reshape(-1)
            if vals.size != n:
                raise ValueError(f"fill has {vals.size} values, the array {n}")
            write_raw(tf, vals)
        tf.close()
        pad_to_pages(path, page_bytes or block_size)
        return cls.open(path, "r+", cache_bytes, block_size=block_size, page_bytes=page_bytes, **array_opts, **options)

    @classmethod
    def open(cls, path, mode: str = "r", cache_bytes: int = DEFAULTS["cache_bytes"], *, block_size: int = _BLOCK_SIZE,
             page_bytes: int | None = None, ways: int = DEFAULTS["ways"], device=None,
             staging_groups: int = DEFAULTS["staging_groups"], **engine_options) -> "DeviceArray":
        """Open an array file (a TensorFile); mode "r+" allows writes (the file is then padded to whole pages)."""
        from .tensor import TensorFile

        if mode == "r+":
            pad_to_pages(path, page_bytes or block_size)
        tf = TensorFile.open(path, mode, block_size=block_size, **engine_options)
        try:
            return cls(tf, cache_bytes, page_bytes=page_bytes, ways=ways, device=device, staging_groups=staging_groups)
        except BaseException:
            tf.close()
            raise

    # -- access ---------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return (f"gpuio.DeviceArray({self.file.path!r}, n={self.n}, dtype={self.dtype}, device={self.device}, "
                f"cache {self.sets} sets x {self.ways} ways x {self.page_bytes} B)")

    def _idx(self, idx) -> torch.Tensor:
        self._here()
        if isinstance(idx, np.ndarray):
            idx = torch.from_numpy(idx)
        elif not isinstance(idx, torch.Tensor):
            idx = torch.as_tensor(idx)
        if idx.is_floating_point() or idx.is_complex() or idx.dtype == torch.bool:
            raise TypeError(f"indices must be integers, got dtype {idx.dtype}")
        idx = idx.reshape(-1).to(self.device, torch.int64).contiguous()
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= self.n):
            raise IndexError(f"indices must lie in [0, {self.n}), got min {int(idx.min())}, max {int(idx.max())}")
        return idx

    def _check(self) -> None:
        err = self._c.error()
        if err == 0:
            return
        self._c.clear_error()
        if err == errno.ERANGE:
            raise IndexError(f"{self!r}: a kernel accessed an element outside [0, {self.n})")
        raise OSError(err, f"{self!r}: a page read or write-back failed ({os.strerror(err)}); engine: "
                           f"{self.file.engine.stats().get('gpu_last_error', '')}")

    def gather(self, idx, *, check: bool = True) -> torch.Tensor:
        """Elements idx (any integer array/tensor, duplicates allowed) as a tensor on the array's device.
        GPU: ordered on torch's current stream; check=True waits for it and raises a failed read."""
        idx = self._idx(idx)
        out = torch.empty(idx.numel(), dtype=self.torch_dtype, device=self.device)
        if idx.numel() == 0:
            return out
        self._run(self._c.gather, idx, out, check)
        return out

    def scatter(self, idx, vals, *, check: bool = True) -> None:
        """a[idx] = vals (cached, dirty until evicted or flushed). With duplicate indices one value wins."""
        if not self.file.writable:
            raise ValueError(f"{self.file.path} is open read-only; open it with mode='r+'")
        idx = self._idx(idx)
        vals = torch.as_tensor(vals)
        if vals.numel() != idx.numel():
            raise ValueError(f"{vals.numel()} values for {idx.numel()} indices")
        vals = vals.reshape(-1).to(self.device, self.torch_dtype).contiguous()
        if idx.numel() == 0:
            return
        self._run(self._c.scatter, idx, vals, check)

    def _run(self, op, idx: torch.Tensor, data: torch.Tensor, check: bool) -> None:
        """The cache's gather or scatter over idx and data. GPU: on torch's current stream; check=True waits
        for it and raises a failed read or write-back."""
        if self.device.type != "cuda":
            op(idx, data)
            return
        stream = torch.cuda.current_stream(self.device)
        op(idx, data, stream.cuda_stream)
        if check:
            stream.synchronize()
            self._check()

    def __getitem__(self, idx):
        if isinstance(idx, (int, np.integer)):
            i = int(idx) + (self.n if idx < 0 else 0)
            return self.gather(torch.tensor([i]))[0].item()
        if isinstance(idx, slice):
            idx = torch.arange(*idx.indices(self.n))
        return self.gather(idx)

    def __setitem__(self, idx, vals) -> None:
        if isinstance(idx, (int, np.integer)):
            idx = [int(idx) + (self.n if idx < 0 else 0)]
            vals = [vals]
        elif isinstance(idx, slice):
            idx = torch.arange(*idx.indices(self.n))
        self.scatter(idx, vals)

    # -- cache control --------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write every dirty page back (they stay cached, clean); GPU: waits for the device first."""
        self._here()
        self._c.flush()
        self._check()

    def invalidate(self) -> None:
        """Drop every cached page (unflushed writes are lost: flush() first to keep them)."""
        self._here()
        self._c.invalidate()

    def stats(self) -> dict:
        """hits, misses (element accesses), hit_rate, page_reads, page_writes, evictions, requests."""
        self._here()
        s = dict(self._c.counters())
        total = s["hits"] + s["misses"]
        s["hit_rate"] = s["hits"] / total if total else 0.0
        s.update(device=str(self.device), cache_bytes=self.cache_bytes, sets=self.sets, ways=self.ways,
                 page_bytes=self.page_bytes, round_pages=self.round_pages)
        return s

    def reset_stats(self) -> None:
        """Zero the hit/miss and I/O counters stats() reports."""
        self._here()
        self._c.reset_counters()

    def cached_pages(self) -> list[int]:
        """Page held by each cache slot (slot = set * ways + way), -1 where empty."""
        self._here()
        return list(self._c.tags())

    def ref_bytes(self) -> bytes:
        """GPU: the C++ gpuio::ArrayRef (by value) for kernels of your own using gpuio::DeviceArray<T>."""
        if self.device.type != "cuda":
            raise ValueError("ref_bytes() exists for a DeviceArray on a CUDA device")
        return self._c.ref_bytes()

    def close(self, flush: bool = True) -> None:
        """Flush (unless flush=False), free the cache, close the file. Idempotent."""
        if self._closed:
            return
        if self._fork_gen != fork_generation():
            flush = False  # a forked child that never used the array: its cache and writes are the parent's
        try:
            if flush and self.file.writable:
                self.flush()
        finally:
            self._closed = True
            self._c = None
            self.file.close()

    def __enter__(self) -> "DeviceArray":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _arrive(file, cache_bytes: int, page_bytes: int, ways: int, device: str, staging_groups: int) -> DeviceArray:
    """Unpickle a DeviceArray: the file (reopened here) behind an empty cache of the same geometry."""
    return DeviceArray(file, cache_bytes, page_bytes=page_bytes, ways=ways, device=device,
                       staging_groups=staging_groups)


def pad_to_pages(path, page_bytes: int) -> None:
    """Extend a TensorFile so its data ends on a whole page (pages past the data read as zeros)."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(f)
        offset = f.tell()
    nbytes = math.prod(shape) * dtype.itemsize
    need = offset + max(page_bytes, -(-nbytes // page_bytes) * page_bytes)
    if os.path.getsize(path) < need:
        os.truncate(path, need)


def write_raw(tf, values: np.ndarray, start: int = 0) -> None:
    """Write flat `values` into TensorFile tf from element `start` on (block-aligned chunks through the engine;
    used to fill large arrays without a per-row scatter)."""
    item = tf.dtype.itemsize
    bs = tf.block_size
    flat = np.ascontiguousarray(values, dtype=tf.dtype).reshape(-1)
    if (start * item) % bs:
        raise ValueError(f"start={start} must fall on a block boundary ({bs // item} elements)")
    chunk = (64 << 20) // bs * bs
    raw = flat.view(np.uint8)
    first = tf.data_offset // bs + start * item // bs
    for lo in range(0, raw.size, chunk):
        part = raw[lo:lo + chunk]
        nblk = -(-part.size // bs)
        buf = np.zeros(nblk * bs, np.uint8)
        buf[:part.size] = part
        if part.size % bs and lo + chunk >= raw.size:  # keep what follows the last element in its block
            tail = np.empty(bs, np.uint8)
            tf.target.read(np.array([first + lo // bs + nblk - 1], np.int64), tail)
            buf[part.size:] = tail[part.size % bs:]
        tf.target.write(np.arange(first + lo // bs, first + lo // bs + nblk, dtype=np.int64), buf)

__all__ = ["DEFAULTS", "ELEM_BYTES", "DeviceArray", "pad_to_pages", "write_raw"]
