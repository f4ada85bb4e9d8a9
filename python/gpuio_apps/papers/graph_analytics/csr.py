"""Out-of-core CSR graphs: a Graph500-style Kronecker generator and an edge-list loader that write the graph as
a folder of TensorFiles, the edges (and weights) on storage, the row offsets in memory.

    g = generate_kronecker("g/", scale=20, edgefactor=16, seed=1, device="cuda")   # or load_edges("g/", edges)
    g = CSRGraph("g/")      # row_ptr (int64, in memory), col.npy (int32 TensorFile), weight.npy (float32)

The graph is undirected: both directions of every edge are stored, self-loops and duplicate edges removed,
neighbours sorted. An edge's weight is a deterministic function of its unordered end points (the same in both
directions), in (0, 1], exactly representable in float32. The build is chunked by source-vertex range, so its
memory is the generated edge list plus one chunk (on the GPU at scale 26: ~20 GiB).
"""
from __future__ import annotations

import json
import os

import numpy as np
import torch

from gpuio.device_array import pad_to_pages

META = "graph.json"
A, B, C = 0.57, 0.19, 0.19  # Graph500 initiator probabilities (D = 0.05)
CHUNK_EDGES = 1 << 27        # directed edges per build chunk (bounds the build's extra memory)
WEIGHT_LEVELS = 1024         # weights are k / 1024, k in 1..1024


def edge_weight(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """float32 weight of undirected edge {u, v}: (hash(min, max) % 1024 + 1) / 1024."""
    lo, hi = torch.minimum(u, v).long(), torch.maximum(u, v).long()
    h = (lo * 0x9E3779B1 + hi * 0x85EBCA77) & 0xFFFFFFFF
    h = ((h ^ (h >> 15)) * 0x2C1B3C6D) & 0xFFFFFFFF
    return ((h % WEIGHT_LEVELS) + 1).float() / WEIGHT_LEVELS


def kronecker_edges(scale: int, edgefactor: int, seed: int, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Graph500 Kronecker edge list (2^scale vertices, edgefactor * 2^scale edges), vertex ids permuted at random;
    int32 tensors on `device` (self-loops and duplicates still present, as Graph500 generates them)."""
    if not isinstance(scale, int) or not 1 <= scale <= 31:
        raise ValueError(f"scale={scale!r} must be an int in [1, 31]")
    if not isinstance(edgefactor, int) or edgefactor < 1:
        raise ValueError(f"edgefactor={edgefactor!r} must be an int >= 1")
    n, m = 1 << scale, edgefactor << scale
    gen = torch.Generator(device=device).manual_seed(seed)
    src = torch.empty(m, dtype=torch.int32, device=device)
    dst = torch.empty(m, dtype=torch.int32, device=device)
    ab, c_norm, a_norm = A + B, C / (1 - (A + B)), A / (A + B)
    step = 1 << 26
    for lo in range(0, m, step):
        k = min(step, m - lo)
        s = torch.zeros(k, dtype=torch.int32, device=device)
        d = torch.zeros(k, dtype=torch.int32, device=device)
        for bit in range(scale):
            ii = torch.rand(k, generator=gen, device=device) > ab
            jj = torch.rand(k, generator=gen, device=device) > torch.where(ii, c_norm, a_norm)
            s |= ii.int() << bit
            d |= jj.int() << bit
        src[lo:lo + k], dst[lo:lo + k] = s, d
    perm = torch.randperm(n, generator=gen, device=device).int()
    return perm[src], perm[dst]  # int32 indices: no 8-byte copies of the edge list


class _Appender:
    """Appends values to a 1-D TensorFile, whole blocks at a time (the partial tail waits for more)."""

    def __init__(self, tf):
        self.tf, self.pos, self.carry = tf, 0, np.empty(0, tf.dtype)
        self.per_block = tf.block_size // tf.dtype.itemsize
        self.first = tf.data_offset // tf.block_size

    def add(self, values: np.ndarray, final: bool = False) -> None:
        data = np.concatenate([self.carry, values.astype(self.tf.dtype, copy=False)])
        whole = data.size // self.per_block * self.per_block
        if final and whole < data.size:
            pad = np.zeros(self.per_block - (data.size - whole), self.tf.dtype)
            data, whole = np.concatenate([data, pad]), data.size + pad.size
        if whole:
            nblk = whole // self.per_block
            ids = np.arange(self.first + self.pos, self.first + self.pos + nblk, dtype=np.int64)
            self.tf.target.write(ids, np.ascontiguousarray(data[:whole]).view(np.uint8))
            self.pos += nblk
        self.carry = data[whole:].copy()


def build_csr(out_dir, src: torch.Tensor, dst: torch.Tensor, num_nodes: int, meta: dict | None = None,
              block_size: int = 4096) -> "CSRGraph":
    """Write the undirected CSR of edge list (src, dst) into out_dir (chunked by source range, on src.device)."""
    from gpuio.tensor import TensorFile

    if src.shape != dst.shape or src.dim() != 1:
        raise ValueError(f"src and dst must be 1-D of one length, got {tuple(src.shape)} and {tuple(dst.shape)}")
    if num_nodes < 1 or num_nodes > 2**31 - 1:
        raise ValueError(f"num_nodes={num_nodes} must lie in [1, 2^31)")
    if src.numel() and (int(src.min()) < 0 or int(dst.min()) < 0 or
                        int(src.max()) >= num_nodes or int(dst.max()) >= num_nodes):
        raise ValueError(f"edge end points must lie in [0, {num_nodes})")
    os.makedirs(out_dir, exist_ok=True)
    device = src.device
    keep = src != dst
    s = torch.cat([src[keep], dst[keep]]).int()
    d = torch.cat([dst[keep], src[keep]]).int()
    del keep
    directed = s.numel()
    # Vertex ranges of about CHUNK_EDGES directed edges each (from the out-degree histogram).
    deg = torch.bincount(s, minlength=num_nodes)  # int32 input: no 8-byte copy of the edge list
    cum = torch.cumsum(deg, 0).cpu()
    bounds = [0]
    target = CHUNK_EDGES
    while bounds[-1] < num_nodes:
        nxt = int(torch.searchsorted(cum, torch.tensor(target), right=True))
        nxt = max(nxt, bounds[-1] + 1)
        bounds.append(min(nxt, num_nodes))
        target = int(cum[bounds[-1] - 1]) + CHUNK_EDGES
    del deg, cum
    row_counts = np.zeros(num_nodes, np.int64)
    total = 0
    # Upper bound of the unique edges: the directed count; the files are truncated to the true size below.
    col = TensorFile.create(os.path.join(out_dir, "col.npy"), (max(directed, 1),), "int32", block_size=block_size)
    wgt = TensorFile.create(os.path.join(out_dir, "weight.npy"), (max(directed, 1),), "float32", block_size=block_size)
    cw, ww = _Appender(col), _Appender(wgt)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        m = (s >= lo) & (s < hi)
        key = torch.unique((s[m].long() - lo) * num_nodes + d[m].long())  # sorted: by source, then neighbour
        cs, cd = key // num_nodes + lo, key % num_nodes
        row_counts[lo:hi] = torch.bincount(cs - lo, minlength=hi - lo).cpu().numpy()
        cw.add(cd.int().cpu().numpy())
        ww.add(edge_weight(cs, cd).cpu().numpy())
        total += key.numel()
    cw.add(np.empty(0, np.int32), final=True)
    ww.add(np.empty(0, np.float32), final=True)
    col.close()
    wgt.close()
    for name, dtype in (("col.npy", "int32"), ("weight.npy", "float32")):
        _rewrite_header(os.path.join(out_dir, name), max(total, 1), dtype, block_size)
    row_ptr = np.zeros(num_nodes + 1, np.int64)
    np.cumsum(row_counts, out=row_ptr[1:])
    np.save(os.path.join(out_dir, "row_ptr.npy"), row_ptr)
    info = dict(meta or {}, num_nodes=num_nodes, num_edges=total, block_size=block_size, undirected=True)
    with open(os.path.join(out_dir, META), "w") as f:
        json.dump(info, f, indent=1)
    return CSRGraph(out_dir)


def _rewrite_header(path, n: int, dtype: str, block_size: int) -> None:
    """Shrink a 1-D TensorFile's declared length to n elements (data stays; file trimmed to whole blocks)."""
    from gpuio.tensor import npy_header

    offset = max(4096, block_size)
    with open(path, "r+b") as f:
        f.write(npy_header(np.dtype(dtype), (n,), offset))
    size = offset + max(block_size, -(-n * np.dtype(dtype).itemsize // block_size) * block_size)
    os.truncate(path, size)


def generate_kronecker(out_dir, scale: int, edgefactor: int = 16, seed: int = 1, device="cpu",
                       block_size: int = 4096) -> "CSRGraph":
    """Graph500 Kronecker graph of 2^scale vertices written as an out-of-core CSR (see the module doc)."""
    src, dst = kronecker_edges(scale, edgefactor, seed, device)
    meta = dict(generator="kronecker", scale=scale, edgefactor=edgefactor, seed=seed)
    return build_csr(out_dir, src, dst, 1 << scale, meta, block_size)


def load_edges(out_dir, path, num_nodes: int | None = None, device="cpu", block_size: int = 4096) -> "CSRGraph":
    """CSR from an edge-list file: .npy of shape (2, E) or (E, 2), or text lines "u v" ('#'/'%' comments)."""
    path = os.fspath(path)
    if path.endswith(".npy"):
        e = np.load(path)
        if e.ndim != 2 or 2 not in e.shape:
            raise ValueError(f"{path}: edge array has shape {e.shape}, expected (2, E) or (E, 2)")
        e = e if e.shape[0] == 2 else e.T
    else:
        e = np.loadtxt(path, dtype=np.int64, comments=("#", "%"), usecols=(0, 1), ndmin=2).T
    if not np.issubdtype(e.dtype, np.integer):
        raise ValueError(f"{path}: edge ids must be integers, got {e.dtype}")
    n = int(e.max()) + 1 if num_nodes is None else int(num_nodes)
    t = torch.from_numpy(np.ascontiguousarray(e, dtype=np.int64)).to(device)
    return build_csr(out_dir, t[0], t[1], n, dict(generator="file", source=os.path.abspath(path)), block_size)


class CSRGraph:
    """An out-of-core CSR graph folder: row_ptr in memory, col/weight TensorFiles on storage."""

    def __init__(self, path):
        self.path = os.fspath(path)
        meta_path = os.path.join(self.path, META)
        if not os.path.exists(meta_path):
            raise FileNotFoundError(f"{self.path}: no {META} (not a graph folder; build one with generate_kronecker)")
        with open(meta_path) as f:
            self.meta = json.load(f)
        self.num_nodes = int(self.meta["num_nodes"])
        self.num_edges = int(self.meta["num_edges"])
        self.block_size = int(self.meta["block_size"])
        self.row_ptr = np.load(os.path.join(self.path, "row_ptr.npy"))
        arrays = self.meta.get("arrays", {})  # where col/weight live when not in the folder (Ceph volumes)
        self.col_path = arrays.get("col", os.path.join(self.path, "col.npy"))
        self.weight_path = arrays.get("weight", os.path.join(self.path, "weight.npy"))
        self.on_volume = self.col_path.startswith("rbd:")

    def __repr__(self) -> str:
        return f"CSRGraph({self.path!r}, nodes={self.num_nodes}, directed edges={self.num_edges})"

    def pad_for_pages(self, page_bytes: int) -> None:
        """Pad col/weight to whole pages (a DeviceArray with pages larger than a block needs it); a volume is
        grown through gpuio.volumes (pages past the data read as zeros either way)."""
        for name, p in (("col", self.col_path), ("weight", self.weight_path)):
            if not self.on_volume:
                pad_to_pages(p, page_bytes)
                continue
            from gpuio import volumes

            with self.open_array(name) as tf:
                need = tf.data_offset + max(page_bytes, -(-tf.nbytes // page_bytes) * page_bytes)
            if volumes.info(p)["size"] < need:
                volumes.resize(p, need)

    def open_array(self, name: str, **engine_options):
        """The TensorFile of "col" or "weight", read-only: a file, or a Ceph volume through gpuio.volumes
        (the volume layer owns how a TensorFile lives on a volume; the tensor layer knows files only)."""
        path = {"col": self.col_path, "weight": self.weight_path}[name]
        if self.on_volume:
            from gpuio import volumes

            return volumes.open_tensor(path, "r", block_size=self.block_size, **engine_options)
        from gpuio.tensor import TensorFile

        return TensorFile.open(path, "r", block_size=self.block_size, **engine_options)

    def edges(self, name: str) -> np.ndarray:
        """The first num_edges values of "col" or "weight": memory-mapped from a file, read through gpuio
        into memory from a volume."""
        if not self.on_volume:
            return np.load({"col": self.col_path, "weight": self.weight_path}[name], mmap_mode="r")[:self.num_edges]
        with self.open_array(name) as tf:
            return tf[:self.num_edges].numpy()

    def to_scipy(self):
        """scipy.sparse.csr_matrix of the weights (in memory: small graphs only)."""
        import scipy.sparse as sp

        col, w = self.edges("col"), self.edges("weight")
        n = self.num_nodes
        return sp.csr_matrix((np.asarray(w, np.float64), np.asarray(col), self.row_ptr), shape=(n, n))

    @property
    def nbytes_on_storage(self) -> int:
        return self.num_edges * 8

    def degree_max(self) -> int:
        return int(np.diff(self.row_ptr).max()) if self.num_nodes else 0


def copy_to_volumes(g: CSRGraph, out_dir, volume: str, block_size: int | None = None) -> CSRGraph:
    """The graph with col/weight on Ceph volumes `volume`-col and `volume`-weight ("rbd:POOL/IMAGE" names,
    created here; the TensorFile layout byte for byte, written through gpuio) and row_ptr + graph.json in
    out_dir."""
    from gpuio import volumes
    from gpuio.engine import Engine

    if not volume.startswith("rbd:"):
        raise ValueError(f"volume={volume!r} is not a Ceph volume name rbd:POOL/IMAGE")
    bs = block_size or g.block_size
    arrays = {}
    for name, path in (("col", g.col_path), ("weight", g.weight_path)):
        size = os.path.getsize(path)
        if size % bs:
            raise ValueError(f"{path}: {size} bytes is not a whole number of {bs}-byte blocks")
        arrays[name] = f"{volume}-{name}"
        volumes.create(arrays[name], size)
        step = (64 << 20) // bs
        with open(path, "rb") as f, Engine([arrays[name]], block_size=bs) as eng:
            for first in range(0, size // bs, step):
                data = np.frombuffer(f.read(step * bs), np.uint8)
                eng.write(np.arange(first, first + data.size // bs, dtype=np.int64), data)
            eng.sync()
    os.makedirs(out_dir, exist_ok=True)
    np.save(os.path.join(out_dir, "row_ptr.npy"), g.row_ptr)
    with open(os.path.join(out_dir, META), "w") as f:
        json.dump(dict(g.meta, arrays=arrays), f, indent=1)
    return CSRGraph(out_dir)


def choose_root(g: CSRGraph, seed: int) -> int:
    """A vertex with at least one edge (Graph500 draws roots among non-isolated vertices)."""
    deg = np.diff(g.row_ptr)
    cand = np.flatnonzero(deg > 0)
    if cand.size == 0:
        raise ValueError(f"{g.path}: the graph has no edges")
    return int(cand[np.random.default_rng(seed).integers(cand.size)])


__all__ = ["CSRGraph", "build_csr", "choose_root", "copy_to_volumes", "edge_weight", "generate_kronecker",
           "kronecker_edges", "load_edges"]
