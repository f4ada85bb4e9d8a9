"""load_file and safe_open: the reading half of the API, over `Checkpoint` (the files) and `_read` (the bytes)."""
from __future__ import annotations

import os
from typing import Any

import torch

from ._format import SafetensorError, TensorInfo, header_length, parse_header
from ._read import owned, read_tensors, views
from ._source import Checkpoint, Selection, resolve, resolve_device

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


def _narrowed(filename: Filename, tensors: Selection) -> tuple[Filename, Selection]:
    """For a sharded index and a selection: only the shards that hold the tensors chosen (their names, as the
    index maps them), so a rank with only its own shards on disk loads; else (filename, tensors) as given."""
    if tensors is None or isinstance(tensors, str):
        return filename, tensors
    files, _ = resolve(filename)
    if len(files) < 2 or any(names is None for _, names in files):
        return filename, tensors
    owner = {n: path for path, names in files for n in names or ()}
    if callable(tensors):
        want = [n for n in sorted(owner) if tensors(n)]
    else:
        want = list(dict.fromkeys(tensors))
        missing = [n for n in want if n not in owner]
        if missing:
            raise KeyError(f"no tensor named {missing[0]!r} in the index {os.fspath(filename)}")
    return list(dict.fromkeys(owner[n] for n in want)), want


def load_file(filename: Filename, device: Any = "cpu", *, tensors: Selection = None,
              stats: dict | None = None, zero_copy: bool = False, process_group: Any = None,
              shard: Any = None) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors checkpoint on `device` ("cpu", "cuda", "cuda:N", an int or a torch.device),
    as `safetensors.torch.load_file` gives them, read by gpuio: from the page cache where the bytes are there,
    with O_DIRECT where they are not, overlapped with the copies to the device.

    filename: a file, a list of files, a Hugging Face sharded index (`model.safetensors.index.json`) or a
    directory holding one (else its *.safetensors). tensors: names to read (KeyError naming one that is not
    there), or a predicate on the name (a tensor-parallel rank reads only its share); None: all. stats
    (optional dict): filled with bytes, seconds, pagecache_bytes, direct_bytes, data_path (one line, e.g.
    'pagecache 6.1 GiB + uring+direct 2.1 GiB -> pinned -> cuda:0'), ...

    With tensors= on a sharded index only the shards holding the tensors chosen are opened (the others need
    not be on this machine). process_group (a torch.distributed group): the ranks of the group load the
    checkpoint together (gpuio.safetensors._dist.load_distributed; shard= says how it is split among them).

    Each tensor owns its memory (deleting it frees its bytes) and starts on a 256-byte boundary, whatever its
    offset in the file: the bytes are read through the plan reader's staging and copied to each tensor at its
    shift. zero_copy=True: the tensors of one file are views of one buffer instead, read the same way (aligned
    only as in the file, which for files written by `safetensors` is not 256 bytes, so cuBLAS may pick other
    kernels; the buffer is freed when the last of its views is). Bad files
    raise SafetensorError (a ValueError) naming the file and what is wrong."""
    if process_group is not None:
        from ._dist import load_distributed

        return load_distributed(filename, device=device, process_group=process_group, tensors=tensors,
                                shard=shard, stats=stats)
    if shard is not None:
        raise ValueError(f"shard={shard!r} needs process_group= (the ranks it splits the checkpoint among)")
    dev = resolve_device(device)
    filename, tensors = _narrowed(filename, tensors)
    if isinstance(filename, list) and not filename:
        if stats is not None:
            stats.update(bytes=0, seconds=0.0, files=0, tensors=0)
        return {}
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

    def __getitem__(self, index: Any) -> Any:
        return self._owner._out(self._info.name, self._rows(index))

    def _rows(self, index: Any) -> torch.Tensor:
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
        if framework not in ("pt", "pytorch", "torch", "np", "numpy"):
            raise ValueError(f"framework={framework!r}: gpuio.safetensors gives PyTorch tensors ('pt') or NumPy "
                             f"arrays ('np')")
        self._np = framework in ("np", "numpy")
        if self._np and str(device) != "cpu":
            raise ValueError(f"device={device!r} with framework={framework!r}: NumPy arrays live in host memory "
                             f"(device='cpu')")
        self.device = resolve_device(device)
        self._ckpt: Checkpoint | None = Checkpoint(filename)
        self._stats: dict = {}
        self._args = (filename, framework, str(self.device))

    def __reduce__(self):
        """Pickled as what it opens (a spawned DataLoader worker or rank reopens the files); a forked child keeps
        the open files and reads through its own plan reader."""
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

    def offset_keys(self) -> list[str]:
        """Tensor names in the order their bytes lie in the file (files in the order opened), as safetensors'
        offset_keys(): reading in this order reads each file front to back."""
        where = self._checkpoint().where
        return sorted(where, key=lambda n: (where[n][0], where[n][1].begin, n))

    def _out(self, name: str, t: torch.Tensor) -> Any:
        """t as this handle gives it: the tensor ('pt') or a NumPy array ('np', as safetensors.numpy)."""
        if not self._np:
            return t
        try:
            return t.numpy()
        except TypeError:
            raise TypeError(f"tensor {name!r} is {t.dtype}, which NumPy has no dtype for; open with "
                            f"framework='pt'") from None

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

    def get_tensor(self, name: str) -> Any:
        return self._out(name, self._read_one(self._info(name)))

    def get_slice(self, name: str) -> _Slice:
        return _Slice(self, self._info(name))

    def get_tensors(self, names: Selection = None) -> dict[str, torch.Tensor]:
        """Many tensors in one overlapped pass (names, a predicate, or None: all)."""
        ckpt = self._checkpoint()
        self._stats = {}
        got = _read(ckpt, ckpt.select(names), self.device, self._stats)
        return {n: self._out(n, t) for n, t in got.items()} if self._np else got

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
