"""What a load reads: one file, a list of files, a directory, or a Hugging Face sharded index
(`model.safetensors.index.json`), opened as one `Checkpoint`: every file's descriptor and checked header, the
name -> tensor map over all of them. The bytes are read by the plan reader (_plan.py), which opens each file
itself; saves write through _open_io's O_DIRECT target.
"""
from __future__ import annotations

import json
import os
import stat
from typing import Any, Callable, Collection, Iterable

import torch

from ._format import Header, SafetensorError, TensorInfo, read_header

INDEX_SUFFIX = ".index.json"
Selection = Collection[str] | Callable[[str], bool] | None


def _open_io(path: str, writable: bool) -> Any:
    """The O_DIRECT target a save writes `path` through: a target of the process's engine
    (gpuio.default_engine(); its own engine only where that one's block size is not 4 KiB). None where the file
    system refuses O_DIRECT (tmpfs): the caller then goes through the page cache, and says so."""
    from ..engine import open_files

    try:
        return open_files(path, block_size=4096, direct=True, writable=writable)
    except OSError as e:
        if e.errno == 22:  # EINVAL: the file system does not support O_DIRECT
            return None
        raise


def _index_files(path: str) -> tuple[list[tuple[str, list[str]]], dict | None]:
    """The shards of a sharded index in the order first named, with the tensors the index maps to each."""
    try:
        with open(path, "rb") as f:
            index = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise SafetensorError(f"{path}: not a JSON index ({e})") from None
    wm = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
        raise SafetensorError(f"{path}: no weight_map of tensor name -> file name in the index")
    base = os.path.dirname(os.path.abspath(path))
    files: dict[str, list[str]] = {}
    for name, fname in wm.items():
        files.setdefault(os.path.join(base, fname), []).append(name)
    meta = index.get("metadata")
    return list(files.items()), meta if isinstance(meta, dict) else None


def resolve(spec: Any) -> tuple[list[tuple[str, list[str] | None]], dict | None]:
    """[(file path, tensor names the index assigns it or None: all)] and the index's metadata, from a path,
    a list of paths, a directory (its index if it has one, else its *.safetensors in name order) or an index."""
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise SafetensorError("the list of files is empty")
        out: list[tuple[str, list[str] | None]] = []
        for p in spec:
            files, _ = resolve(p)
            out += files
        return out, None
    if not isinstance(spec, (str, os.PathLike)):
        raise TypeError(f"filename must be a path or a list of paths, got {type(spec).__name__}")
    path = os.fspath(spec)
    if os.path.isdir(path):
        idx = [n for n in sorted(os.listdir(path)) if n.endswith(".safetensors" + INDEX_SUFFIX)]
        if idx:
            return resolve(os.path.join(path, idx[0]))
        shards = [os.path.join(path, n) for n in sorted(os.listdir(path)) if n.endswith(".safetensors")]
        if not shards:
            raise SafetensorError(f"{path}: a directory with no *.safetensors file and no index")
        return [(s, None) for s in shards], None
    if path.endswith(INDEX_SUFFIX):
        return _index_files(path)
    return [(path, None)], None


def _opened(path: str) -> int:
    """A read-only descriptor of the regular file at path (checked first: opening a FIFO would block)."""
    if not os.path.exists(path):
        raise FileNotFoundError(2, "No such file", path)
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise SafetensorError(f"{path}: not a regular file")
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC)


class Checkpoint:
    """The open files of one checkpoint (descriptors a forked child inherits as they are). Not thread-safe to close
    while a read runs; reads may run in turn."""

    def __init__(self, spec: Any):
        files, self.index_metadata = resolve(spec)
        self.paths: list[str] = []
        self.fds: list[int] = []
        self.headers: list[Header] = []
        self.where: dict[str, tuple[int, TensorInfo]] = {}  # name -> (file index, its info)
        try:
            for path, names in files:
                fd = _opened(path)
                self.fds.append(fd)
                self.paths.append(path)
                head = read_header(fd, path)
                self.headers.append(head)
                want = head.tensors if names is None else names
                for name in want:
                    if name not in head.tensors:
                        raise SafetensorError(f"{path}: the index maps tensor {name!r} to this file, which lacks it")
                    if name in self.where:
                        other = self.paths[self.where[name][0]]
                        raise SafetensorError(f"tensor {name!r} is in both {other} and {path}")
                    self.where[name] = (len(self.headers) - 1, head.tensors[name])
        except BaseException:
            self.close()
            raise

    def keys(self) -> list[str]:
        return sorted(self.where)

    def metadata(self) -> dict[str, str] | None:
        """The file's __metadata__ (one file), else the index's metadata or the first file's."""
        if len(self.headers) == 1:
            return self.headers[0].metadata
        if self.index_metadata is not None:
            return {str(k): str(v) for k, v in self.index_metadata.items()}
        return self.headers[0].metadata if self.headers else None

    def select(self, tensors: Selection) -> list[str]:
        """Names chosen by `tensors`: None (all), names (each must exist: KeyError naming the first that does
        not), or a predicate on the name."""
        if tensors is None:
            return self.keys()
        if callable(tensors):
            return [n for n in self.keys() if tensors(n)]
        if isinstance(tensors, str):
            raise TypeError("tensors must be a collection of names or a predicate, not one str")
        names = list(dict.fromkeys(tensors))
        missing = [n for n in names if n not in self.where]
        if missing:
            raise KeyError(f"no tensor named {missing[0]!r} in {self.describe()}")
        return names

    def describe(self) -> str:
        return self.paths[0] if len(self.paths) == 1 else f"{len(self.paths)} files ({self.paths[0]}, ...)"

    def by_file(self, names: Iterable[str]) -> dict[int, list[TensorInfo]]:
        out: dict[int, list[TensorInfo]] = {}
        for n in names:
            i, info = self.where[n]
            out.setdefault(i, []).append(info)
        return out

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []

    def __enter__(self) -> "Checkpoint":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def resolve_device(device: Any) -> torch.device:
    """A torch.device from "cpu", "cuda", "cuda:N", an int (cuda:N) or a torch.device; ValueError naming it."""
    if isinstance(device, bool):
        raise ValueError(f"device={device!r} is not a device")
    try:
        dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device={device!r} is not a device name ('cpu', 'cuda', 'cuda:N')") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r} but torch sees no CUDA device")
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
    elif dev.type != "cpu":
        raise ValueError(f"device={device!r}: gpuio.safetensors loads onto 'cpu' or 'cuda'")
    return dev
