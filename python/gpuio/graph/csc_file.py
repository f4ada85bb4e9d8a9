"""Graph structure out of core: the CSC of one relation as two gpuio TensorFiles, built and read in chunks.

A relation directory holds `colptr.npy` (int64 [num_dst + 1]) and `row.npy` (int64 [num_edges], the
source ids grouped by destination, ascending source order within a destination where built from an edge
list). Both are gpuio TensorFiles (block-aligned .npy, so `np.load(mmap_mode="r")` reads them too).

- `build_csc` turns a stream of (dst, src) edge chunks into that layout without holding the edges: one
  pass counts in-degrees (memory: 8 bytes per destination node), then each pass over the stream keeps
  the edges of one destination range of at most `bucket_edges` edges, sorts them (stable: the stream's
  order is kept within a destination) and writes them at their final place. Passes = edges / bucket_edges.
- `CSCFile` samples from the files through the engine: the column pointers and the neighbour lists are
  read on demand through one `gpuio.TableCache` each (page caches on `device`), so the host holds neither
  the edges nor the pointers; a file whose cache share covers it is read whole at open instead.
- `split_struct_cache` shares one page-cache budget among the files of several relations: pointer files
  whole first, then the neighbour lists in proportion to their file sizes (see its docstring for why).
- `CSCMemory` is the same interface over tensors (the switch for structure that fits in memory);
  `open_csc(path, in_memory=...)` picks one. Both return identical values, so a sampler seeded the same
  draws the same neighbours from either (tests/python/pyg/test_hetero.py checks it).

Other processes: both pickle as what they hold: a CSCFile its two TensorFiles (reopened in the receiver), the
files it holds whole (their tensors travel: nothing is read again) and its page caches (gpuio.TableCache:
rebuilt empty there); a forked child inherits them, its files reopening on first use. Structure on CUDA refuses at
once in a forked child of a process that used CUDA (gpuio.gpu.BAD_FORK).
"""
from __future__ import annotations

import json
import os

import numpy as np
import torch

CHUNK_EDGES = 1 << 22  # edges read or written per step while streaming a relation
BUCKET_EDGES_DEFAULT = 1 << 25  # edges held (dst + src + order: ~24 B each) per pass of build_csc
# page cache in all for the relation files a graph reads on demand (split_struct_cache shares it out); the old
# 64 MiB per relation x IGBH's 7 relations, so no IGBH relation's cache shrank when it became one budget
STRUCT_CACHE_BYTES_DEFAULT = 448 << 20


def create_table(path: str, shape, dtype) -> tuple[int, int]:
    """A new zero-filled TensorFile; returns (data offset, row bytes) for `write_rows`."""
    from gpuio.tensor import TensorFile
    with TensorFile.create(path, shape, dtype) as tf:
        return tf.data_offset, tf.row_bytes


def write_rows(path: str, data_offset: int, row_bytes: int, lo: int, rows: np.ndarray) -> None:
    """Write `rows` (C-contiguous, the table's dtype) at row `lo` of the table file (plain buffered I/O:
    generation and import write sequentially, once)."""
    buf = np.ascontiguousarray(rows).view(np.uint8).reshape(-1)
    with open(path, "r+b") as f:
        f.seek(data_offset + lo * row_bytes)
        f.write(memoryview(buf))


def relation_paths(directory: str) -> tuple:
    """(pointer file, neighbour-list file) paths of a relation directory."""
    return os.path.join(directory, "colptr.npy"), os.path.join(directory, "row.npy")


def _stream(path: str, lo: int, hi: int) -> np.ndarray:
    return np.array(np.load(path, mmap_mode="r")[lo:hi])


def csc_chunks(directory: str, chunk_edges: int = CHUNK_EDGES):
    """Iterator factory over a CSC relation's edges as (dst, src) int64 chunks, in storage order."""
    colptr_path, row_path = relation_paths(directory)

    def chunks():
        colptr = np.load(colptr_path, mmap_mode="r")
        num_dst = colptr.shape[0] - 1
        lo = 0
        while lo < num_dst:
            # as many destinations as keep the chunk near chunk_edges edges (at least one destination)
            hi = int(np.searchsorted(colptr, colptr[lo] + chunk_edges, side="right")) - 1
            hi = min(max(hi, lo + 1), num_dst)
            ptr = np.array(colptr[lo:hi + 1])
            src = _stream(row_path, int(ptr[0]), int(ptr[-1]))
            dst = np.repeat(np.arange(lo, hi, dtype=np.int64), np.diff(ptr))
            yield dst, src
            lo = hi
    return chunks


def edge_list_chunks(path: str, reverse: bool = False, chunk_edges: int = CHUNK_EDGES):
    """Iterator factory over an [E, 2] (src, dst) .npy edge list (IGBH's layout) as (dst, src) chunks;
    reverse=True yields (src, dst): the CSC of the reverse relation."""
    def chunks():
        arr = np.load(path, mmap_mode="r")
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise ValueError(f"{path}: an edge list must have shape [E, 2], got {arr.shape}")
        for lo in range(0, arr.shape[0], chunk_edges):
            part = np.array(arr[lo:lo + chunk_edges], dtype=np.int64)
            src, dst = part[:, 0], part[:, 1]
            yield (src, dst) if reverse else (dst, src)
    return chunks


def build_csc(chunks, num_dst: int, directory: str, num_src: int | None = None,
              bucket_edges: int = BUCKET_EDGES_DEFAULT) -> dict:
    """Write the CSC of the edges `chunks()` yields ((dst, src) int64 array pairs; called once per pass)
    into `directory`. Returns the relation's meta (also written as meta.json)."""
    if bucket_edges < 1:
        raise ValueError(f"bucket_edges must be >= 1, got {bucket_edges}")
    os.makedirs(directory, exist_ok=True)
    counts = np.zeros(num_dst, dtype=np.int64)
    for dst, src in chunks():
        if dst.size and (dst.min() < 0 or dst.max() >= num_dst):
            raise IndexError(f"{directory}: destination ids must lie in [0, {num_dst}), "
                             f"got min {dst.min()}, max {dst.max()}")
        if num_src is not None and src.size and (src.min() < 0 or src.max() >= num_src):
            raise IndexError(f"{directory}: source ids must lie in [0, {num_src}), "
                             f"got min {src.min()}, max {src.max()}")
        counts += np.bincount(dst, minlength=num_dst)
    colptr = np.zeros(num_dst + 1, dtype=np.int64)
    np.cumsum(counts, out=colptr[1:])
    del counts
    num_edges = int(colptr[-1])
    cp_path, row_path = relation_paths(directory)
    off, rb = create_table(cp_path, (num_dst + 1,), "int64")
    write_rows(cp_path, off, rb, 0, colptr)
    row_off, row_rb = create_table(row_path, (num_edges,), "int64")
    lo = 0
    while lo < num_dst:  # destination range [lo, hi) holding at most bucket_edges (or one destination)
        hi = int(np.searchsorted(colptr, colptr[lo] + bucket_edges, side="right")) - 1
        hi = min(max(hi, lo + 1), num_dst)
        if colptr[hi] > colptr[lo]:
            ds, ss = [], []
            for dst, src in chunks():
                keep = (dst >= lo) & (dst < hi)
                ds.append(dst[keep])
                ss.append(src[keep])
            dst, src = np.concatenate(ds), np.concatenate(ss)
            src = src[np.argsort(dst, kind="stable")]
            write_rows(row_path, row_off, row_rb, int(colptr[lo]), src)
        lo = hi
    meta = dict(num_dst=num_dst, num_src=num_src, num_edges=num_edges)
    with open(os.path.join(directory, "meta.json"), "w") as f:
        json.dump(meta, f)
    return meta


def _by_size(budget: int, sizes: list) -> list:
    """`budget` bytes shared in proportion to `sizes`, each at most its size (all of them when the budget
    covers them); integer shares summing to min(budget, sum(sizes)) (largest remainders get the odd bytes)."""
    total = sum(sizes)
    if budget >= total:
        return list(sizes)
    exact = [budget * s for s in sizes]
    out = [e // total for e in exact]
    for i in sorted(range(len(sizes)), key=lambda i: -(exact[i] % total))[:budget - sum(out)]:
        out[i] += 1
    return out


def split_struct_cache(budget: int, files: list) -> list:
    """One page-cache budget over relations: `files` holds each relation's (pointer file bytes, neighbour-list
    file bytes); returns each relation's (pointer cache bytes, neighbour-list cache bytes), summing to
    min(budget, all the files), none above its file.

    Pointer files come first, whole (shared by size when they do not all fit): every sampled node reads its
    pointers, from a file ~1/8 the size of its lists, so a pointer page is read far more often than a list
    page. The rest goes to the neighbour lists in proportion to their file sizes, so that no relation thrashes
    while another leaves cache unused. On the 2 M-paper IGBH graph (935 MiB of files, 100 steps of 1024
    seeds, fan-outs 10/5) 896 MiB read 4155 MiB as 128 MiB per relation (1:3 pointers:lists), 3238 MiB split by
    relation size, 1514 MiB split by file size, 1303 MiB this way (docs/archive/results/RESULTS_HETERO.md)."""
    if budget < 0:
        raise ValueError(f"the structure cache budget must be >= 0 bytes, got {budget}")
    if any(p < 0 or r < 0 for p, r in files):
        raise ValueError(f"file sizes must be >= 0, got {files}")
    ptr = _by_size(budget, [p for p, _ in files])
    row = _by_size(budget - sum(ptr), [r for _, r in files])
    return list(zip(ptr, row))


class CSCMemory:
    """A relation's CSC held in tensors on `device` (the in-memory switch)."""

    def __init__(self, colptr: torch.Tensor, row: torch.Tensor, device=None):
        device = torch.device(device) if device is not None else colptr.device
        self.colptr, self.row = colptr.to(device, torch.long), row.to(device, torch.long)
        self.device = device

    @classmethod
    def load(cls, directory: str, device=None) -> "CSCMemory":
        """Read a relation directory's colptr.npy and row.npy whole into tensors on device."""
        return cls(*(torch.from_numpy(np.load(p)) for p in relation_paths(directory)), device)

    @property
    def num_dst(self) -> int:
        """Destination nodes of the relation (len(colptr) - 1)."""
        return int(self.colptr.numel()) - 1

    @property
    def num_edges(self) -> int:
        """Edges of the relation (len(row))."""
        return int(self.row.numel())

    def ptr(self, dst: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(first CSC position, in-degree) of each destination id."""
        start = self.colptr.index_select(0, dst)  # index_select: several times advanced indexing's rate
        return start, self.colptr.index_select(0, dst + 1) - start

    def rows(self, pos: torch.Tensor) -> torch.Tensor:
        """Source ids at CSC positions `pos`."""
        return self.row.index_select(0, pos)

    def stats(self) -> dict:
        """bytes_from_device: always 0 (nothing is read from storage)."""
        return dict(bytes_from_device=0)

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(colptr, row) as held."""
        return self.colptr, self.row


class CSCFile:
    """A relation's CSC read on demand from its TensorFiles through the engine, with a page cache each
    for pointers and neighbour lists. cache_bytes: the relation's budget (shared as `split_struct_cache`
    does; 0 disables caching), or a (pointer bytes, neighbour-list bytes) pair already split.

    A file whose share covers it whole is read whole at open, through the engine in chunks, into one tensor
    on `device` (the same device memory its cache would fill): it is then sampled like `CSCMemory`, with no
    page misses over the first batches and no page lookups. The 200 000-paper IGBH graph on two H100s
    (structure 92 MB, cache 448 MiB) spent its first step (3.0 s of 8.8 s) and more filling that cache one
    4 KiB page at a time (docs/archive/results/RESULTS_2026-11-25-night.md)."""

    def __init__(self, directory: str, cache_bytes=STRUCT_CACHE_BYTES_DEFAULT, device=None,
                 **engine_options):
        from gpuio.tensor import TensorFile
        paths = relation_paths(directory)
        if isinstance(cache_bytes, (tuple, list)):
            ptr_bytes, row_bytes = (int(x) for x in cache_bytes)
        else:
            [(ptr_bytes, row_bytes)] = split_struct_cache(int(cache_bytes), [relation_file_bytes(directory)])
        if ptr_bytes < 0 or row_bytes < 0:
            raise ValueError(f"cache_bytes must be >= 0, got {cache_bytes}")
        self.directory = directory
        self.colptr_tf = TensorFile.open(paths[0], **engine_options)
        self.row_tf = TensorFile.open(paths[1], **dict(engine_options))
        self.device = torch.device(device if device is not None else
                                   ("cuda" if torch.cuda.is_available() else "cpu"))
        self._ptr, self._row = (self._open(tf, budget) for tf, budget in
                                ((self.colptr_tf, ptr_bytes), (self.row_tf, row_bytes)))
        self.cache_bytes = (ptr_bytes, row_bytes)

    def _open(self, tf, budget: int):
        """The file whole in a tensor when `budget` covers it, else a page cache of `budget` bytes over it."""
        from gpuio.cache import TableCache
        if budget >= tf.nbytes > 0:
            return _whole(tf, self.device)
        return TableCache(tf, gpu_cache_bytes=budget, window=0, accumulate=False, device=self.device)

    @property
    def whole(self) -> tuple:
        """(pointers, neighbour lists): whether each file is held whole (read at open) rather than cached."""
        return isinstance(self._ptr, torch.Tensor), isinstance(self._row, torch.Tensor)

    @property
    def bytes_at_open(self) -> int:
        """Bytes read when the relation opened: the files held whole."""
        return sum(tf.nbytes for tf, held in zip((self.colptr_tf, self.row_tf), self.whole) if held)

    @property
    def num_dst(self) -> int:
        """Destination nodes of the relation (len(colptr) - 1)."""
        return self.colptr_tf.num_rows - 1

    @property
    def num_edges(self) -> int:
        """Edges of the relation (len(row))."""
        return self.row_tf.num_rows

    def _check_process(self) -> None:
        if self.device.type == "cuda":
            from gpuio.gpu import refuse_bad_fork
            refuse_bad_fork()

    def ptr(self, dst: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(first CSC position, in-degree) of each destination id, read through the pointer cache."""
        self._check_process()
        n = dst.numel()
        both = _read(self._ptr, torch.cat([dst, dst + 1]).to(self.device)).long()
        return both[:n], both[n:] - both[:n]

    def rows(self, pos: torch.Tensor) -> torch.Tensor:
        """Source ids at CSC positions pos, read through the neighbour-list cache."""
        self._check_process()
        if pos.numel() == 0:
            return torch.empty(0, dtype=torch.long, device=self.device)
        return _read(self._row, pos.to(self.device)).long()

    def stats(self) -> dict:
        """bytes_from_device of both files (the whole files read at open included) and the page hit rate of
        each cache (1.0 for a file held whole: every lookup is served from device memory)."""
        p, r = (dict(bytes_from_device=0, page_hit_rate=1.0) if isinstance(s, torch.Tensor) else s.stats()
                for s in (self._ptr, self._row))
        return dict(bytes_from_device=self.bytes_at_open + p["bytes_from_device"] + r["bytes_from_device"],
                    ptr_page_hit_rate=p["page_hit_rate"], row_page_hit_rate=r["page_hit_rate"])

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole relation as tensors (reads every block not held: for small relations and checks)."""
        return (_read(self._ptr, torch.arange(self.num_dst + 1, device=self.device)).long(),
                _read(self._row, torch.arange(self.num_edges, device=self.device)).long())

    def close(self) -> None:
        """Close both TensorFiles (their engines stop)."""
        self.colptr_tf.close()
        self.row_tf.close()


WHOLE_CHUNK_BYTES = 64 << 20  # read per request when a structure file is read whole at open


def _whole(tf, device) -> torch.Tensor:
    """Every row of `tf` on `device`, read through its engine WHOLE_CHUNK_BYTES at a time."""
    out = torch.empty(tuple(tf.shape), dtype=tf.torch_dtype, device=device)
    step = max(1, WHOLE_CHUNK_BYTES // out.element_size())
    for lo in range(0, tf.num_rows, step):
        hi = min(lo + step, tf.num_rows)
        out[lo:hi] = tf.gather(torch.arange(lo, hi, device=device))
    return out


def _read(src, idx: torch.Tensor) -> torch.Tensor:
    """Entries idx of a file held whole (a tensor) or read through its cache (a TableCache)."""
    return src.index_select(0, idx) if isinstance(src, torch.Tensor) else src.gather(idx)


def _file_bytes(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0  # TensorFile.open names the missing file


def relation_file_bytes(directory: str) -> tuple:
    """(pointer file bytes, neighbour-list file bytes) of a relation directory: what `split_struct_cache`
    shares a budget by."""
    return tuple(_file_bytes(p) for p in relation_paths(directory))


def open_csc(directory: str, in_memory: bool = False, cache_bytes=STRUCT_CACHE_BYTES_DEFAULT,
             device=None):
    """A relation directory as `CSCMemory` (in_memory=True) or `CSCFile` (read on demand; cache_bytes as
    `CSCFile` takes it)."""
    if not os.path.exists(relation_paths(directory)[0]):
        raise FileNotFoundError(f"{directory}: no colptr.npy (not a CSC relation directory)")
    if in_memory:
        return CSCMemory.load(directory, device if device is not None else
                              ("cuda" if torch.cuda.is_available() else "cpu"))
    return CSCFile(directory, cache_bytes, device)

__all__ = ["CHUNK_EDGES", "BUCKET_EDGES_DEFAULT", "STRUCT_CACHE_BYTES_DEFAULT", "create_table", "write_rows",
           "relation_paths", "csc_chunks", "edge_list_chunks", "build_csc", "split_struct_cache", "CSCMemory",
           "CSCFile", "WHOLE_CHUNK_BYTES", "relation_file_bytes", "open_csc"]
