"""load_file and safe_open: the reading half of the API, over `Checkpoint` (the files) and `_read` (the bytes)."""
from __future__ import annotations

import os
from typing import Any

import torch

from ._format import SafetensorError, TensorInfo, header_length, parse_header
from ._read import owned, read_tensors, views
from ._source import Checkpoint, Selection, resolve_device

Filename = str | os.PathLike | list | tuple


def _read(ckpt: Checkpoint, names: list[str], device: torch.device, stats: dict | None,
          infos: dict[str, TensorInfo] | None = None, zero_copy: bool = False) -> dict[str, torch.Tensor]:
    by_file: dict[int, list[TensorInfo]] = {}
    for n in names:
        f, info = ckpt.where[n]
        by_file.setdefault(f, []).append(infos[n] if infos else info)
    out, st = read_tensors(ckpt, by_file, device, zero_copy=zero_copy)
    if stats is not None:
        stats.update(st, files=len(by_file), tensors=len(names))
    return {n: out[n] for n in names}


def load_file(filename: Filename, device: Any = "cpu", *, tensors: Selection = None,
              stats: dict | None = None, zero_copy: bool = False) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors checkpoint on `device` ("cpu", "cuda", "cuda:N", an int or a torch.device),
    as `safetensors.torch.load_file` gives them, read by gpuio: from the page cache where the bytes are there,
    with O_DIRECT where they are not, overlapped with the copies to the device.

    filename: a file, a list of files, a Hugging Face sharded index (`model.safetensors.index.json`) or a
    directory holding one (else its *.safetensors). tensors: names to read (KeyError naming one that is not
    there), or a predicate on the name (a tensor-parallel rank reads only its share); None: all. stats
    (optional dict): filled with bytes, seconds, pagecache_bytes, direct_bytes, data_path (one line, e.g.
    'pagecache 6.1 GiB + uring+direct 2.1 GiB -> pinned -> cuda:0'), ...

    Each tensor owns its memory (deleting it frees its bytes) and starts on a 256-byte boundary, whatever its
    offset in the file: the bytes are read through staging and copied to each tensor at its shift.
    zero_copy=True: the tensors of one file are views of one buffer instead (no copy on the CPU, where O_DIRECT
    reads land in place; aligned only as in the file, which for files written by `safetensors` is not 256
    bytes, so cuBLAS may pick other kernels; the buffer is freed when the last of its views is). Bad files
    raise SafetensorError (a ValueError) naming the file and what is wrong."""
    dev = resolve_device(device)
    with Checkpoint(filename) as ckpt:
        return _read(ckpt, ckpt.select(tensors), dev, stats, zero_copy=zero_copy)


def load(data: bytes | bytearray | torch.Tensor, device: Any = "cpu") -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file held in memory (`safetensors.torch.load`): bytes, or a uint8 tensor of
    the file's bytes on any device, whose tensors are then views of it (no copy). device: where bytes go."""
    if isinstance(data, torch.Tensor):
        if data.dtype != torch.uint8 or data.dim() != 1:
            raise ValueError(f"data must be a 1-D uint8 tensor of the file's bytes, got {data.dtype} {tuple(data.shape)}")
        buf, head8 = data, bytes(data[:8].cpu().numpy())
    else:
        buf = torch.frombuffer(bytearray(data), dtype=torch.uint8) if len(data) else torch.empty(0, dtype=torch.uint8)
        buf, head8 = buf.to(resolve_device(device)), bytes(data[:8])
    n = header_length("<bytes>", head8, buf.numel())
    head = parse_header("<bytes>", bytes(buf[8:8 + n].cpu().numpy()), buf.numel())
    infos = list(head.tensors.values())
    return views({0: (buf, {t.name: t.begin for t in infos})}, {0: infos}, buf.device)


def cached_fraction(filename: Filename) -> float:
    """The fraction of a checkpoint's bytes (all its files) now in the page cache, 0.0 to 1.0: what a load
    would copy from memory rather than read from the disk. Reads no data (cachestat(2) or mincore(2))."""
    from .. import _core

    with Checkpoint(filename) as ckpt:
        total = sum(h.size for h in ckpt.headers)
        cached = sum(_core.page_cache_residency(fd, [(0, h.size)])[0][0] for fd, h in zip(ckpt.fds, ckpt.headers))
    return cached / total if total else 1.0


def evict(filename: Filename) -> None:
    """Drop a checkpoint's files (as load_file names them) from the page cache: each is fsynced (dirty pages
    cannot be dropped) and its clean pages released (posix_fadvise DONTNEED), so the next load reads the disk
    without root's drop_caches. Pages other processes map may stay; cached_fraction says what did."""
    with Checkpoint(filename) as ckpt:
        for fd in ckpt.fds:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def _normalize(i: int, n: int, what: str) -> int:
    if i < -n or i >= n:
        raise IndexError(f"index {i} is out of range for {what} of size {n}")
    return i % n


class _Slice:
    """A tensor not yet read: get_shape(), get_dtype(), and [index] reading only the rows the first index
    selects (the rest of the index is applied to them)."""

    def __init__(self, owner: "safe_open", info: TensorInfo):
        self._owner, self._info = owner, info

    def get_shape(self) -> list[int]:
        return list(self._info.shape)

    def get_dtype(self) -> str:
        return self._info.dtype

    def __getitem__(self, index: Any) -> torch.Tensor:
        info = self._info
        idx = index if isinstance(index, tuple) else (index,)
        shape = info.torch_shape
        first = idx[0] if idx else Ellipsis
        if not shape or first is Ellipsis or not isinstance(first, (int, slice)) or isinstance(first, bool):
            return owned(self._owner._read_one(info)[index])
        rows = shape[0]
        if isinstance(first, int):
            r0 = _normalize(first, rows, f"dimension 0 of {info.name!r}")
            r1, rest = r0 + 1, (0,) + idx[1:]
        else:
            start, stop, step = first.indices(rows)
            if step < 0:
                raise ValueError(f"slice {first} of {info.name!r}: steps must be positive (as in torch)")
            r0, r1 = start, max(start, stop)
            rest = (slice(0, r1 - r0, step),) + idx[1:]
        row_bytes = info.nbytes // rows if rows else 0
        part = TensorInfo(info.name, info.dtype, (r1 - r0, *info.shape[1:]), info.begin + r0 * row_bytes,
                          info.begin + r1 * row_bytes)
        return owned(self._owner._read_one(part)[rest])


class safe_open:
    """`safetensors.safe_open` over gpuio: keys(), metadata(), get_tensor(name), get_slice(name)[...], and
    get_tensors(names) to read many at once (overlapped, one pass). Files stay open until the context ends.

        with gpuio.safetensors.safe_open("model.safetensors", framework="pt", device="cuda") as f:
            w = f.get_tensor("lm_head.weight")
            shard = f.get_slice("embed.weight")[rank * rows:(rank + 1) * rows]

    filename: as load_file's (a file, a list, a sharded index or a directory). It crosses into DataLoader
    workers and spawned ranks: pickled as its arguments, reopened on arrival; after a fork it reads through the
    child's own engine."""

    def __init__(self, filename: Filename, framework: str = "pt", device: Any = "cpu"):
        if framework not in ("pt", "pytorch", "torch"):
            raise ValueError(f"framework={framework!r}: gpuio.safetensors gives PyTorch tensors ('pt')")
        self.device = resolve_device(device)
        self._ckpt: Checkpoint | None = Checkpoint(filename)
        self._stats: dict = {}
        self._args = (filename, framework, str(self.device))

    def __reduce__(self):
        """Pickled as what it opens (a spawned DataLoader worker or rank reopens the files); a forked child keeps
        the open files and reads through its own process engine."""
        if self._ckpt is None:
            raise ValueError("safe_open is closed")
        return (safe_open, self._args)

    def _checkpoint(self) -> Checkpoint:
        if self._ckpt is None:
            raise ValueError("safe_open is closed")
        return self._ckpt

    def keys(self) -> list[str]:
        """Tensor names, sorted (as safetensors gives them)."""
        return self._checkpoint().keys()

    def metadata(self) -> dict[str, str] | None:
        """The header's __metadata__ (for a sharded index: the index's metadata)."""
        return self._checkpoint().metadata()

    def _info(self, name: str) -> TensorInfo:
        ckpt = self._checkpoint()
        if name not in ckpt.where:
            raise SafetensorError(f"no tensor named {name!r} in {ckpt.describe()}")
        return ckpt.where[name][1]

    def _read_one(self, info: TensorInfo) -> torch.Tensor:
        self._stats = {}
        return _read(self._checkpoint(), [info.name], self.device, self._stats, {info.name: info})[info.name]

    def get_tensor(self, name: str) -> torch.Tensor:
        return self._read_one(self._info(name))

    def get_slice(self, name: str) -> _Slice:
        return _Slice(self, self._info(name))

    def get_tensors(self, names: Selection = None) -> dict[str, torch.Tensor]:
        """Many tensors in one overlapped pass (names, a predicate, or None: all)."""
        ckpt = self._checkpoint()
        self._stats = {}
        return _read(ckpt, ckpt.select(names), self.device, self._stats)

    def stats(self) -> dict:
        """The last read's stats (as load_file's stats=)."""
        return dict(self._stats)

    def close(self) -> None:
        if self._ckpt is not None:
            self._ckpt.close()
            self._ckpt = None

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
