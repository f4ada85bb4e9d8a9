"""Where the algorithms get a frontier's adjacency from: the element positions `idx` (ascending int64, on the
algorithm's device) of col (and weight) are mapped to their values, on that device.

- DeviceArraySource ("gpuio-array"): BaM-style device arrays (gpuio.DeviceArray): every element through the
  page cache, misses served by the engine — the GPU path (on the CPU, the same algorithm in host memory);
- GatherSource ("gpuio-gather"): TensorFile.gather of the frontier's adjacency ranges — the CPU path;
- PreadSource ("pread+copy"): the CPU-centric loader baseline — the blocks covering the ranges read with pread
  (O_DIRECT, threads) and copied to the device (CAM's baseline: one cudaMemcpy per block, in C++, where the
  CUDA layer exists; else pread of merged runs + one copy), in units of the device array's page size;
- MemmapSource ("memmap+copy"): np.memmap, fancy index, copy to the device (the DGL/GIDS mmap baseline);
- MemorySource ("in-memory"): the whole arrays on the device (the upper bound, and a reference).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from gpuio.device_array import DeviceArray
from .csr import CSRGraph


class EdgeSource:
    name = "?"
    cache_bytes_per_array = 0  # what a repeat read of recent edges finds cached (algos.sssp_window)

    def fetch(self, idx: torch.Tensor, weights: bool):
        """(neighbours int64, weights float32 or None) of edge positions idx, on idx.device."""
        raise NotImplementedError

    def stats(self) -> dict:
        return {}

    def close(self) -> None:
        pass


class DeviceArraySource(EdgeSource):
    name = "gpuio-array"

    def __init__(self, g: CSRGraph, device, cache_bytes: int, page_bytes: int | None = None, ways: int = 8,
                 weights: bool = True, **engine_options):
        if page_bytes and page_bytes > g.block_size:
            g.pad_for_pages(page_bytes)
        share = cache_bytes // 2 if weights else cache_bytes
        def array(name):  # over the graph's TensorFile (file or volume); the array owns and closes it
            tf = g.open_array(name, **engine_options)
            try:
                return DeviceArray(tf, share, page_bytes=page_bytes, ways=ways, device=device)
            except BaseException:
                tf.close()
                raise

        self.col = array("col")
        self.w = array("weight") if weights else None
        self.cache_bytes_per_array = min(a.cache_bytes for a in (self.col, self.w) if a is not None)

    def fetch(self, idx, weights):
        col = self.col.gather(idx).long()
        return col, (self.w.gather(idx) if weights else None)

    def stats(self) -> dict:
        out = {}
        for name, a in (("col", self.col), ("weight", self.w)):
            if a is not None:
                s = a.stats()
                out.update({f"{name}_{k}": s[k] for k in ("hits", "misses", "page_reads", "hit_rate")})
        hits = out.get("col_hits", 0) + out.get("weight_hits", 0)
        total = hits + out.get("col_misses", 0) + out.get("weight_misses", 0)
        out["hit_rate"] = hits / total if total else 0.0
        return out

    def reset(self) -> None:
        for a in (self.col, self.w):
            if a is not None:
                a.invalidate()
                a.reset_stats()

    def close(self):
        for a in (self.col, self.w):
            if a is not None:
                a.close()


class GatherSource(EdgeSource):
    name = "gpuio-gather"

    def __init__(self, g: CSRGraph, weights: bool = True, **engine_options):
        self.col = g.open_array("col", **engine_options)
        self.w = g.open_array("weight", **engine_options) if weights else None

    def fetch(self, idx, weights):
        col = self.col.gather(idx).long()
        return col, (self.w.gather(idx) if weights else None)

    def close(self):
        self.col.close()
        if self.w is not None:
            self.w.close()


def _unit_plan(idx: torch.Tensor, item: int, data_offset: int, unit: int):
    """Distinct file units (ascending, unit-sized, in file coordinates) covering ascending element positions
    idx, and each element's position (in elements) in their concatenation."""
    byte = data_offset + idx * item
    units, inv = torch.unique_consecutive(byte // unit, return_inverse=True)
    return units, (inv * unit + byte % unit) // item


def npy_data_offset(path) -> int:
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        (np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0)(f)
        return f.tell()


def _o_direct_ok(path) -> bool:
    """Whether the file system takes O_DIRECT (tmpfs refuses it at open: then buffered pread is the baseline)."""
    try:
        os.close(os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0)))
        return hasattr(os, "O_DIRECT")
    except OSError:
        return False


class PreadSource(EdgeSource):
    """The CPU-centric loader: per call, the file units (unit_bytes, the device array's page size for a like
    comparison) covering the frontier's ranges are read with pread and copied to the device."""

    name = "pread+copy"

    def __init__(self, g: CSRGraph, device, weights: bool = True, unit_bytes: int | None = None, threads: int = 16):
        self.g, self.device, self.threads = g, torch.device(device), threads
        self.unit = unit_bytes or g.block_size
        if self.unit < g.block_size or self.unit & (self.unit - 1):
            raise ValueError(f"unit_bytes={unit_bytes} must be a power of two >= the block size {g.block_size}")
        self.files = {"col": (g.col_path, np.int32), "weight": (g.weight_path, np.float32)}
        self.offsets = {}
        for key, (path, _) in self.files.items():
            self.offsets[key] = npy_data_offset(path)
            size = os.path.getsize(path)
            if size % self.unit:  # whole units: O_DIRECT preads of the last one are not short
                os.truncate(path, size + self.unit - size % self.unit)
        self.pool = ThreadPoolExecutor(threads)
        self.fds = {k: os.open(p, os.O_RDONLY) for k, (p, _) in self.files.items()}
        self.native = False
        if self.device.type == "cuda":
            from gpuio.gpu import cuda_built
            self.native = cuda_built() and _o_direct_ok(g.col_path)

    def _read(self, key: str, idx: torch.Tensor) -> torch.Tensor:
        path, dtype = self.files[key]
        u = self.unit
        units, pos = _unit_plan(idx, np.dtype(dtype).itemsize, self.offsets[key], u)
        ids = units.cpu().numpy().astype(np.int64)
        if self.native:  # CAM's baseline in C++: pread (O_DIRECT) + cudaMemcpy per unit, `threads` threads
            from gpuio.gpu import pread_memcpy_baseline
            buf = torch.empty(ids.size * u, dtype=torch.uint8, device=self.device)
            pread_memcpy_baseline(path, ids, u, buf, self.threads)
        else:  # pread of each run of consecutive units, threads, then one copy to the device
            host = np.empty(ids.size * u, np.uint8)
            cuts = np.flatnonzero(np.diff(ids) != 1) + 1
            starts = np.concatenate([[0], cuts])
            ends = np.concatenate([cuts, [ids.size]])

            def run(k):
                a, b = int(starts[k]), int(ends[k])
                data = os.pread(self.fds[key], (b - a) * u, int(ids[a]) * u)
                host[a * u:a * u + len(data)] = np.frombuffer(data, np.uint8)

            list(self.pool.map(run, range(starts.size)))
            buf = torch.from_numpy(host).to(self.device)
        vals = buf.view(torch.int32 if dtype == np.int32 else torch.float32)
        return vals[pos.to(self.device)]

    def fetch(self, idx, weights):
        col = self._read("col", idx).long()
        return col, (self._read("weight", idx) if weights else None)

    def close(self):
        self.pool.shutdown()
        for fd in self.fds.values():
            os.close(fd)


class MemmapSource(EdgeSource):
    name = "memmap+copy"

    def __init__(self, g: CSRGraph, device, weights: bool = True):
        self.device = torch.device(device)
        self.col = np.load(g.col_path, mmap_mode="r")
        self.w = np.load(g.weight_path, mmap_mode="r") if weights else None

    def fetch(self, idx, weights):
        i = idx.cpu().numpy()
        col = torch.from_numpy(self.col[i]).to(self.device).long()
        return col, (torch.from_numpy(self.w[i]).to(self.device) if weights else None)


class MemorySource(EdgeSource):
    name = "in-memory"

    def __init__(self, g: CSRGraph, device, weights: bool = True):
        self.col = torch.from_numpy(np.array(g.edges("col"))).to(device).long()
        self.w = torch.from_numpy(np.array(g.edges("weight"))).to(device) if weights else None

    def fetch(self, idx, weights):
        return self.col[idx], (self.w[idx] if weights else None)


SOURCES = {c.name: c for c in (DeviceArraySource, GatherSource, PreadSource, MemmapSource, MemorySource)}


def make_source(name: str, g: CSRGraph, device, weights: bool = True, cache_bytes: int = 64 << 20,
                page_bytes: int | None = None, **engine_options) -> EdgeSource:
    """An EdgeSource by name (SOURCES). A graph on Ceph volumes: the gpuio sources and in-memory."""
    if g.on_volume and name in ("pread+copy", "memmap+copy"):
        raise ValueError(f"source={name!r} reads files; {g.path} keeps its edges on volumes ({g.col_path})")
    if name == "gpuio-array":
        return DeviceArraySource(g, device, cache_bytes, page_bytes, weights=weights, **engine_options)
    if name == "gpuio-gather":
        return GatherSource(g, weights, **engine_options)
    if name == "pread+copy":
        return PreadSource(g, device, weights, unit_bytes=page_bytes)
    if name == "memmap+copy":
        return MemmapSource(g, device, weights)
    if name == "in-memory":
        return MemorySource(g, device, weights)
    raise ValueError(f"source={name!r} is not one of {', '.join(SOURCES)}")
