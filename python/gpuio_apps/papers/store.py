"""Where the applications keep their data: one flat space of whole blocks on any gpuio store.

    st = Store("data.bin", capacity_bytes=1 << 30)              # a file (created or grown as needed)
    st = Store(["d0.bin", "d1.bin"], capacity_bytes=1 << 30)    # RAID-0 over files (gpuio.Engine striping)
    a = st.alloc("A", nbytes)                                   # an extent: whole blocks, bump-allocated
    h = st.read_async(a, 0, out)       # out: a contiguous CPU or CUDA tensor of a whole number of blocks
    st.write(a, 0, src)

`Store` goes through `gpuio.Engine` (O_DIRECT, io_uring, the CUDA layer's stream-ordered path for CUDA
tensors). `PosixStore` is the CPU-centric baseline over the same files and the same RAID-0 mapping:
synchronous `os.preadv`/`os.pwritev` through the page cache into a host buffer, then a copy to the
destination (`cudaMemcpy` through `Tensor.copy_` for CUDA tensors). Both offer the same calls, so an
application runs unchanged over either and the comparison is the same algorithm on the same bytes.
A volume enters the same way: `store="rbd:POOL/IMAGE"` (or several, comma-separated: RAID-0 over volumes)
is created (or grown) like a file, the engine reads it with the rbd backend, and the baseline is GNStor's
"Basic" (`gpuio_apps.basic_volume`: one synchronous librbd call per request + the same copy) instead of pread.
The cluster and identity are the rbd tool's defaults (CEPH_CONF, CEPH_ARGS).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Sequence

import numpy as np
import torch

from gpuio import defaults
from gpuio.future import Future

from .iodiag import ENGINE_COUNTERS, IoCounters, PendingWrites

CUDA_IDS = ("host", "device")  # Store(cuda_ids=): where a CUDA read's block ids live (class Store says why)
CUDA_IDS_DEFAULT = "host"
BLOCK_BYTES_DEFAULT = defaults.knob("block_size").default
STRIPE_BYTES_DEFAULT = defaults.knob("stripe_bytes").default  # gpuio.Engine's RAID-0 stripe
WORKERS_DEFAULT = None         # None: the engine's own (dynamic) worker count
FILE_BACKENDS = ("uring", "posix")  # backends whose paths are files the store may create; others (sim, a
                                    # volume) name devices that exist already
PREALLOCATE_DEFAULT = False  # Store(preallocate=): reserve the files' blocks (fallocate) when the store opens


@dataclasses.dataclass(frozen=True)
class Extent:
    """A named run of whole blocks in a store's logical block space."""
    name: str
    first_block: int
    nbytes: int
    block_size: int

    @property
    def nblocks(self) -> int:
        return -(-self.nbytes // self.block_size)


def is_volume(paths: Sequence[str]) -> bool:
    """Whether the store's paths are Ceph volumes ("rbd:POOL[/NAMESPACE]/IMAGE"); mixing is refused."""
    vols = [p.startswith("rbd:") for p in paths]
    if any(vols) and not all(vols):
        raise ValueError(f"store={','.join(paths)!r} mixes volumes (rbd:...) and files; use one kind")
    return bool(vols) and all(vols)


def paths_of(store: Any) -> list[str]:
    """A store option (a path, or a list/tuple of paths for RAID-0; a comma-separated string too) as paths."""
    if isinstance(store, (str, os.PathLike)):
        parts = [p for p in os.fspath(store).split(",") if p]
    elif isinstance(store, (list, tuple)):
        parts = [os.fspath(p) for p in store]
    else:
        raise TypeError(f"store must be a path or a list of paths, got {type(store).__name__}")
    if not parts:
        raise ValueError(f"store={store!r} names no file")
    return parts


def _nbytes(t: torch.Tensor, block_size: int, name: str) -> int:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous")
    n = t.numel() * t.element_size()
    if n % block_size:
        raise ValueError(f"{name} holds {n} bytes, not a whole number of {block_size}-byte blocks")
    return n


def preallocate(path: str, nbytes: int) -> bool:
    """Reserve the first nbytes of file `path` on its file system (fallocate, mode 0: blocks allocated as
    unwritten extents, the file grown to nbytes if shorter; blocks it has already are kept). An O_DIRECT
    write into a hole of an ext4 file allocates under the inode's exclusive lock (io_uring punts it to a
    worker thread, one allocating write at a time); into a reserved block it is an overwrite under the shared
    lock. On the dev box's ext4 a 512 MiB sequential 1 MiB write ran at 1.66-1.77 GB/s into holes, 2.07-2.36
    into reserved blocks, 2.27-3.17 over written ones. False where the file system cannot (no emulation:
    glibc's posix_fallocate would write every block)."""
    from gpuio.outputs import reserve_space

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        return nbytes <= 0 or reserve_space(fd, 0, nbytes)
    finally:
        os.close(fd)


def _ensure_volumes(paths: Sequence[str], nbytes: int) -> list[str]:
    """Create each missing volume of nbytes and grow smaller ones; returns those created."""
    from gpuio import volumes

    created = []
    for p in paths:
        try:
            if volumes.info(p)["size"] < nbytes:
                volumes.resize(p, nbytes)
        except FileNotFoundError:
            volumes.create(p, nbytes)
            created.append(p)
    return created


class _Base:
    kind = "?"

    def __init__(self, store: Any, capacity_bytes: int, block_size: int, stripe_bytes: int, files: bool = True,
                 reserve: bool = PREALLOCATE_DEFAULT):
        if not isinstance(capacity_bytes, int) or capacity_bytes <= 0:
            raise ValueError(f"capacity_bytes must be a positive int, got {capacity_bytes!r}")
        if not isinstance(block_size, int) or block_size < 512 or block_size & (block_size - 1):
            raise ValueError(f"block_size must be a power of two >= 512, got {block_size!r}")
        if stripe_bytes % block_size:
            raise ValueError(f"stripe_bytes={stripe_bytes} is not a multiple of block_size={block_size}")
        self.paths = paths_of(store)
        self.block_size, self.stripe_bytes = block_size, stripe_bytes
        n = len(self.paths)
        unit = block_size if n == 1 else stripe_bytes
        per_device = -(-capacity_bytes // (unit * n)) * unit
        self.volume = is_volume(self.paths)
        self.created: list[str] = []  # volumes this store created (common.opened_pair deletes only these)
        if self.volume:
            self.created = _ensure_volumes(self.paths, per_device)
        files = files and not self.volume
        # whether every file's blocks were reserved (preallocate); files are created or grown, devices are
        # taken as they are
        self.preallocated = reserve and files and all([preallocate(p, per_device) for p in self.paths])
        for p in self.paths if files else ():
            if not os.path.exists(p) or os.path.getsize(p) < per_device:
                with open(p, "ab") as f:
                    f.truncate(per_device)
        self.capacity_blocks = per_device * n // block_size
        self._next_block = 0
        self.extents: dict[str, Extent] = {}
        self.io = IoCounters()  # calls, bytes and calls in flight, for the benchmark's I/O diagnostic

    def alloc(self, name: str, nbytes: int) -> Extent:
        """A new extent of nbytes (rounded up to whole blocks) after the previous ones."""
        if name in self.extents:
            raise KeyError(f"extent {name!r} already exists in this store")
        ext = Extent(name, self._next_block, int(nbytes), self.block_size)
        if ext.first_block + ext.nblocks > self.capacity_blocks:
            raise ValueError(f"extent {name!r} of {nbytes} bytes does not fit: the store holds "
                             f"{self.capacity_blocks} blocks, {self._next_block} in use")
        self._next_block += ext.nblocks
        self.extents[name] = ext
        return ext

    def _ids(self, ext: Extent, offset: int, nbytes: int) -> np.ndarray:
        if offset % self.block_size or offset < 0:
            raise ValueError(f"offset {offset} into extent {ext.name!r} is not a whole number of blocks")
        if offset + nbytes > ext.nblocks * self.block_size:
            raise IndexError(f"bytes [{offset}, {offset + nbytes}) lie outside extent {ext.name!r} "
                             f"({ext.nblocks * self.block_size} bytes)")
        first = ext.first_block + offset // self.block_size
        return np.arange(first, first + nbytes // self.block_size, dtype=np.int64)

    def _runs(self, ids: np.ndarray) -> list[tuple[int, int, int, int]]:
        """(device, device offset, byte offset in the request, length) runs of consecutive ids (the engine's
        RAID-0 map: stripe s goes to device s % n at (s // n) * stripe_bytes): how the stores that address the
        files themselves (PosixStore, kvikio_store.KvikioStore) find the blocks the engine stripes."""
        bs, n = self.block_size, len(self.paths)
        if n == 1:
            return [(0, int(ids[0]) * bs, 0, ids.size * bs)]
        per = self.stripe_bytes // bs
        out, i = [], 0
        while i < ids.size:
            b = int(ids[i])
            take = min(per - b % per, ids.size - i)
            stripe = b // per
            out.append((stripe % n, (stripe // n) * self.stripe_bytes + (b % per) * bs, i * bs, take * bs))
            i += take
        return out

    def read(self, ext: Extent, offset: int, out: torch.Tensor):
        return self.read_async(ext, offset, out).wait()

    def write(self, ext: Extent, offset: int, src: torch.Tensor) -> None:
        self.write_async(ext, offset, src).wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Store(_Base):
    """Extents on a gpuio.Engine over `store` (a path or a list of paths: RAID-0). Engine options
    (workers=, backend=, direct=, staging_bytes=, ...) pass through.

    cuda_ids: where the block ids of a CUDA read live. "host" (default): the GPU layer hands every chunk of
    the request to the engine at submit, up to its bounce slots in flight. "device": a publish kernel hands
    each chunk over when the stream reaches it, and the stream waits for that chunk before it publishes the
    next, so one chunk (one bounce slot: 4 MiB by default, four 1 MiB device requests) is in flight per
    stream; on the H200 that read GEMM tiles at 1.47 GB/s against the disk's 2.27. A CUDA read that overlaps
    a CUDA write of this store still in flight takes the "device" way whatever cuda_ids says, so it stays
    ordered after that write on the stream (host ids would start reading before the write reached storage).
    Writes of CUDA memory always go the publish way (their device->bounce copy comes first on the stream).

    preallocate: reserve the files' blocks when the store opens (`preallocate`, below): for a store that is
    written once front to back (a checkpoint), so the O_DIRECT writes are overwrites, not allocations."""
    kind = "gpuio"

    def __init__(self, store: Any, capacity_bytes: int, block_size: int = BLOCK_BYTES_DEFAULT,
                 stripe_bytes: int = STRIPE_BYTES_DEFAULT, workers: int | None = WORKERS_DEFAULT,
                 cuda_ids: str = CUDA_IDS_DEFAULT, preallocate: bool = PREALLOCATE_DEFAULT, **engine_options: Any):
        if cuda_ids not in CUDA_IDS:
            raise ValueError(f"cuda_ids={cuda_ids!r} is not one of {', '.join(CUDA_IDS)}")
        backend = str(engine_options.get("backend", "uring")).removeprefix("fault:")
        super().__init__(store, capacity_bytes, block_size, stripe_bytes, files=backend in FILE_BACKENDS,
                         reserve=preallocate)
        from gpuio.engine import Engine

        self.cuda_ids = cuda_ids
        self._cuda_writes = PendingWrites()
        self._engine_options = dict(engine_options)

        if self.volume:
            # The baseline (another client in this process) writes the same volumes: librbd's cooperative
            # exclusive lock (handed over on request) instead of the engine's single-writer lease.
            engine_options.setdefault("rbd", {"exclusive": False})

        self._gpu_ids: dict = {}

        try:
            self.engine = Engine(self.paths, block_size=block_size, stripe_bytes=stripe_bytes, workers=workers,
                                 **engine_options)
        except OSError:
            if "direct" in engine_options:
                raise
            # e.g. tmpfs refuses O_DIRECT: go through the page cache, and say so in data_path
            self.engine = Engine(self.paths, block_size=block_size, stripe_bytes=stripe_bytes, workers=workers,
                                 direct=False, **engine_options)
        self.capacity_blocks = min(self.capacity_blocks, self.engine.total_blocks)

    def _device_ids(self, ids: np.ndarray, device: torch.device):
        # the ids as a slice of one arange kept on that GPU (no host->GPU copy per request)
        key = device.index
        if key not in self._gpu_ids:
            self._gpu_ids[key] = torch.arange(self.capacity_blocks, dtype=torch.int64, device=device)
        return self._gpu_ids[key][int(ids[0]):int(ids[0]) + ids.size] if ids.size else ids

    def read_async(self, ext: Extent, offset: int, out: torch.Tensor):
        """Start reading out's size from `ext` at byte `offset`. CUDA `out`: stream-ordered on the current
        stream (the future's .event lets other streams wait); see the class docstring for cuda_ids."""
        ids = self._ids(ext, offset, _nbytes(out, self.block_size, "out"))
        where = "host"
        if out.is_cuda and ids.size and (self.cuda_ids == "device" or
                                         self._cuda_writes.overlaps(int(ids[0]), int(ids[0]) + ids.size)):
            ids, where = self._device_ids(ids, out.device), "device"
        h = self.engine.read_async(ids, out.view(torch.uint8).view(-1))
        self.io.submitted("read", out.numel() * out.element_size(), h, where if out.is_cuda else "-")
        return h

    def write_async(self, ext: Extent, offset: int, src: torch.Tensor):
        nbytes = _nbytes(src, self.block_size, "src")
        ids = self._ids(ext, offset, nbytes)
        first, count = (int(ids[0]), ids.size) if ids.size else (0, 0)
        if src.is_cuda and count:
            ids = self._device_ids(ids, src.device)
        h = self.engine.write_async(ids, src.view(torch.uint8).view(-1))
        if src.is_cuda and count:
            self._cuda_writes.add(first, first + count, h)
        self.io.submitted("write", nbytes, h, "device" if src.is_cuda else "-")
        return h

    def engine_counters(self) -> dict:
        """The engine's and GPU layer's counters the I/O diagnostic reads (ops, bytes, stream chunks, ...)."""
        s = self.engine.stats()
        out = {k: s[k] for k in ENGINE_COUNTERS if k in s}
        out["staging_slot_bytes"] = self._engine_options.get("staging_slot_bytes",
                                                          defaults.knob("staging_slot_bytes").default)
        return out

    def data_path(self) -> str:
        return str(self.engine.stats().get("data_path", "?"))

    def sync(self) -> None:
        self.engine.sync()

    def close(self) -> None:
        self.engine.close()


class PosixStore(_Base):
    """The same extents, read and written with pread/pwrite (page cache) + a copy: the CPU-centric baseline.
    On volumes: one synchronous librbd call per run (GNStor's "Basic") + the same copy."""
    kind = "pread"

    def __init__(self, store: Any, capacity_bytes: int, block_size: int = BLOCK_BYTES_DEFAULT,
                 stripe_bytes: int = STRIPE_BYTES_DEFAULT, **_ignored: Any):
        super().__init__(store, capacity_bytes, block_size, stripe_bytes)
        self._fds, self._vols = [], []
        if self.volume:
            from gpuio_apps.basic_volume import SyncVolume

            self.kind = "librbd-sync"
            self._vols = [SyncVolume(p, writable=True) for p in self.paths]
        else:
            self._fds = [os.open(p, os.O_RDWR) for p in self.paths]
        self._host: torch.Tensor | None = None

    def _pread(self, dev: int, buf: memoryview, off: int) -> int:
        return self._vols[dev].read(off, buf) if self._vols else os.preadv(self._fds[dev], [buf], off)

    def _pwrite(self, dev: int, buf: memoryview, off: int) -> int:
        return self._vols[dev].write(off, buf) if self._vols else os.pwritev(self._fds[dev], [buf], off)

    def _staging(self, t: torch.Tensor, nbytes: int) -> torch.Tensor:
        if t.device.type == "cpu":
            return t.view(torch.uint8).view(-1)
        if self._host is None or self._host.numel() < nbytes:
            self._host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=torch.cuda.is_available())
        return self._host[:nbytes]

    def read_async(self, ext: Extent, offset: int, out: torch.Tensor):
        nbytes = _nbytes(out, self.block_size, "out")
        host = self._staging(out, nbytes)
        mv = memoryview(host.numpy())
        for dev, off, at, length in self._runs(self._ids(ext, offset, nbytes)):
            got = self._pread(dev, mv[at:at + length], off)
            if got != length:  # past the end of a file reads zeros, like the engine's zero-filled blocks
                mv[at + got:at + length] = bytes(length - got)
        if out.device.type != "cpu":
            out.view(torch.uint8).view(-1).copy_(host)  # cudaMemcpy from pinned memory, synchronous
        done = Future.completed(out)  # the baseline is synchronous: done when it returns
        self.io.submitted("read", nbytes, done, "-")
        return done

    def write_async(self, ext: Extent, offset: int, src: torch.Tensor):
        nbytes = _nbytes(src, self.block_size, "src")
        host = self._staging(src, nbytes)
        if src.device.type != "cpu":
            host.copy_(src.view(torch.uint8).view(-1))
        mv = memoryview(host.numpy())
        for dev, off, at, length in self._runs(self._ids(ext, offset, nbytes)):
            done = self._pwrite(dev, mv[at:at + length], off)
            if done != length:
                raise OSError(f"short write to {self.paths[dev]} at {off}: {done} of {length} bytes")
        h = Future.completed(None)
        self.io.submitted("write", nbytes, h, "-")
        return h

    def data_path(self) -> str:
        return "rbd_read/rbd_write+copy" if self._vols else "pread/pwrite+copy"

    def sync(self) -> None:
        for fd in self._fds:
            os.fdatasync(fd)
        for v in self._vols:
            v.flush()

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        for v in self._vols:
            v.close()
        self._fds, self._vols = [], []


def open_store(kind: str, store: Any, capacity_bytes: int, **options: Any) -> _Base:
    """kind "gpuio" (the engine) or "pread" (the baseline) over the same files."""
    if kind == "gpuio":
        return Store(store, capacity_bytes, **options)
    if kind == "pread":
        return PosixStore(store, capacity_bytes, **options)
    raise ValueError(f"store kind must be 'gpuio' or 'pread', got {kind!r}")


def same_layout(a: _Base, b: _Base, names: Sequence[str]) -> None:
    """Give store b the extents a has (same names, same blocks), so both address the same bytes."""
    for name in names:
        e = a.extents[name]
        b.extents[name] = e
        b._next_block = max(b._next_block, e.first_block + e.nblocks)
