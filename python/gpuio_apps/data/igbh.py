"""IGBH-shaped heterogeneous graphs on storage: a generator written out of core, the importer for the real
Illinois Graph Benchmark (heterogeneous) files, and `open_igbh` for either.

Schema (IGBH's four node types and relations; reverse relations added as IGBH's RGAT does, so messages
reach every type):

    paper -cites-> paper           paper -written_by-> author     author -affiliated_to-> institute
    paper -topic-> fos             author -rev_written_by-> paper institute -rev_affiliated_to-> author
                                   fos -rev_topic-> paper

On-disk layout (one directory `root`): `meta.json`; per node type `<type>/node_feat.npy` (gpuio
TensorFile, [n, features], float32 or float16); `paper/node_label_19.npy` (int64); per relation
`<src>__<rel>__<dst>/{colptr,row}.npy`: the relation's CSC (sources of each destination), see
gpuio.graph.csc_file.

Model of the generated data (`IGBHConfig`; every random draw is seeded by (seed, table, chunk), so the
same config gives the same bytes, chunk by chunk, in bounded memory):
- Node counts from `papers` P: authors 1.93 P, institutes max(0.0148 P, 2 C), fields of study
  max(0.19 P, 2 C) — IGBH-small's proportions (1 M papers, 1.93 M authors, 14.8 k institutes, 190 k fos).
- Every node of every type has a planted class c = id mod C (C = `classes`, 19 as IGBH's coarse labels).
  A paper's label is its class, except for a `label_noise` share of papers whose label is redrawn
  uniformly (so no model can exceed about 1 - label_noise * (C - 1) / C).
- Features: (signal / sqrt(features)) * centroid[type][c] + N(0, 1) per element (centroids ~ N(0, 1),
  one set per type): two class centroids lie ~1.7 noise standard deviations apart whatever the width,
  so a single row is a weak hint of its class and a neighbourhood's mean a strong one.
- Edges are generated grouped by one endpoint: cites by cited paper, written_by and topic by paper,
  affiliated_to by author. A group node's degree is floor(x_m * u^(-1/tail)) clipped to [min, max]
  (power law; cites heavy-tailed with tail 1.5, the others tail 3); each edge's other endpoint has the
  group node's class with probability `homophily`, else a uniform class, and within the class the
  k-th member with k = floor(m * u^skew) (skew 2: low ids are popular, so out-degrees are skewed too).
  Mean degrees (before `edge_scale`): 12 citations per paper, 6.8 authors per paper, 10.7 topics per
  paper, 2 institutes per author: about 54.7 P directed edges with the reverses.
- Size: P * 3.13 rows of `features` columns; 1024 float32 columns: 12.8 KB per paper (P = 2 M: 25.6 GB
  of features, 109 M edges).
Accuracy this reaches (in-memory RGAT, two layers, fan-outs 10/5): see examples/rgat_igbh.py and the
report in docs/archive/results/RESULTS_HETERO.md.

The real IGBH layout (`import_igbh`): `<src>/<type>/node_feat.npy`, `<src>/paper/node_label_19.npy`
(or `_2K`), `<src>/<s>__<r>__<d>/edge_index.npy` ([E, 2] int64, (source, destination) rows) — the
`processed` directory of an IGBH download (small / medium / large / full). Features are re-written as
TensorFiles (block aligned, chunked), relations become CSC directories, with their reverses.
"""
from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import asdict, dataclass

import numpy as np
import torch

from gpuio.graph.graph_data import random_split
from gpuio.graph.csc_file import BUCKET_EDGES_DEFAULT, build_csc, create_table, csc_chunks, relation_paths, write_rows

NODE_TYPES = ("paper", "author", "institute", "fos")
# (src, rel, dst) generated grouped by `group` ("dst" or "src"); the reverse relation is derived.
RELATIONS = (("paper", "cites", "paper"), ("paper", "written_by", "author"),
             ("author", "affiliated_to", "institute"), ("paper", "topic", "fos"))
REVERSE = {"written_by": "rev_written_by", "affiliated_to": "rev_affiliated_to", "topic": "rev_topic"}
EDGE_TYPES = RELATIONS + tuple((d, REVERSE[r], s) for s, r, d in RELATIONS if r in REVERSE)
LABEL_FILE = "node_label_19.npy"
SPLIT = (0.6, 0.2, 0.2)  # train / val / test share of papers (IGBH's proportions)
CHUNK_ROWS = 1 << 15  # feature rows (or group nodes) generated per step: bounds memory while writing


@dataclass
class IGBHConfig:
    papers: int = 20_000
    features: int = 1024
    dtype: str = "float32"  # or "float16"
    classes: int = 19
    homophily: float = 0.7
    signal: float = 1.2  # class centroids' norm in units of the per-row noise norm / sqrt(features)
    label_noise: float = 0.1
    edge_scale: float = 1.0  # multiplies every mean degree
    max_degree: int = 4096
    seed: int = 0
    gen_device: str = "cpu"  # where feature noise is drawn ("cuda": ~10x faster; different bytes than "cpu")
    version: int = 2

    def num_nodes(self) -> dict:
        p, c = self.papers, self.classes
        return dict(paper=p, author=round(1.93 * p), institute=max(round(0.0148 * p), 2 * c),
                    fos=max(round(0.19 * p), 2 * c))

    def check(self) -> "IGBHConfig":
        if self.papers < 2 * self.classes:
            raise ValueError(f"papers must be >= 2 * classes = {2 * self.classes}, got {self.papers}")
        if self.features < 1 or self.classes < 2:
            raise ValueError(f"need features >= 1 and classes >= 2, got {self.features}, {self.classes}")
        if self.dtype not in ("float32", "float16"):
            raise ValueError(f"dtype must be float32 or float16, got {self.dtype!r}")
        for name in ("homophily", "label_noise"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must lie in [0, 1], got {getattr(self, name)}")
        if self.gen_device not in ("cpu", "cuda"):
            raise ValueError(f"gen_device must be cpu or cuda, got {self.gen_device!r}")
        if self.edge_scale <= 0 or self.max_degree < 1:
            raise ValueError(f"need edge_scale > 0 and max_degree >= 1, got {self.edge_scale}, {self.max_degree}")
        return self


# relation -> (group side, mean degree per group node, tail exponent, min degree)
_DEGREES = {"cites": ("dst", 12.0, 1.5, 0), "written_by": ("src", 6.8, 3.0, 1),
            "affiliated_to": ("src", 2.0, 3.0, 1), "topic": ("src", 10.7, 3.0, 1)}
_SKEW = 2.0


def _gen(*key, device="cpu") -> torch.Generator:
    h = 1469598103934665603
    for k in key:  # FNV-1a over the key's integers: a distinct stream per (seed, table, chunk)
        h = ((h ^ (int(k) & 0xFFFFFFFFFFFF)) * 1099511628211) & 0x7FFFFFFFFFFFFFFF
    return torch.Generator(device=device).manual_seed(h)


def feature_chunk(cfg: IGBHConfig, type_id: int, lo: int, hi: int, dtype: str = "float32") -> torch.Tensor:
    """Rows [lo, hi) of node type `type_id`'s features (on the CPU), the generator's model; drawn in float32,
    rounded to `dtype` where they were drawn (IEEE round-to-nearest-even, as NumPy's astype: same bytes),
    so a float16 table moves half the bytes off the GPU and costs the CPU no conversion."""
    dev = torch.device(cfg.gen_device)
    centroids = torch.randn(cfg.classes, cfg.features, generator=_gen(cfg.seed, 1, type_id, device=dev),
                            device=dev)
    cls = torch.arange(lo, hi, device=dev) % cfg.classes
    noise = torch.randn(hi - lo, cfg.features, generator=_gen(cfg.seed, 2, type_id, lo, device=dev), device=dev)
    return noise.add_(centroids[cls], alpha=cfg.signal / math.sqrt(cfg.features)).to(getattr(torch, dtype)).cpu()


def paper_labels(cfg: IGBHConfig, lo: int, hi: int) -> torch.Tensor:
    g = _gen(cfg.seed, 3, lo)
    y = torch.arange(lo, hi) % cfg.classes
    flip = torch.rand(hi - lo, generator=g) < cfg.label_noise
    return torch.where(flip, torch.randint(0, cfg.classes, (hi - lo,), generator=g), y)


def _degrees(cfg: IGBHConfig, rel_id: int, rel: str, lo: int, hi: int) -> torch.Tensor:
    _, mean, tail, lo_deg = _DEGREES[rel]
    mean *= cfg.edge_scale
    xm = max((mean + 0.5) * (tail - 1) / tail, 1e-3)  # E[floor(xm U^(-1/tail))] ~ xm tail/(tail-1) - 1/2
    u = torch.rand(hi - lo, generator=_gen(cfg.seed, 4, rel_id, lo), dtype=torch.float64).clamp_min(1e-12)
    return torch.floor(xm * u.pow(-1.0 / tail)).clamp(lo_deg, cfg.max_degree).long()


def _partners(cfg: IGBHConfig, rel_id: int, lo: int, owner: torch.Tensor, n_other: int) -> torch.Tensor:
    c = cfg.classes
    g = _gen(cfg.seed, 5, rel_id, lo)
    same = torch.rand(owner.numel(), generator=g) < cfg.homophily
    cls = torch.where(same, owner % c, torch.randint(0, c, (owner.numel(),), generator=g))
    members = (n_other - cls + c - 1) // c
    k = (members * torch.rand(owner.numel(), generator=g, dtype=torch.float64).pow(_SKEW)).long()
    return cls + c * k.clamp_max(members - 1)


def _grouped_relation(cfg: IGBHConfig, rel_id: int, rel: str, directory: str, n_group: int, n_other: int,
                      progress=None) -> int:
    """CSC (group -> the other endpoints) written in two passes of CHUNK_ROWS group nodes: pointers,
    then the edges (degrees are redrawn from the same streams). Returns the edge count."""
    os.makedirs(directory, exist_ok=True)
    cp_path, row_path = relation_paths(directory)
    cp_off, cp_rb = create_table(cp_path, (n_group + 1,), "int64")
    total = 0
    write_rows(cp_path, cp_off, cp_rb, 0, np.zeros(1, np.int64))
    for lo in range(0, n_group, CHUNK_ROWS):
        hi = min(lo + CHUNK_ROWS, n_group)
        ends = total + torch.cumsum(_degrees(cfg, rel_id, rel, lo, hi), 0)
        write_rows(cp_path, cp_off, cp_rb, lo + 1, ends.numpy())
        total = int(ends[-1])
    row_off, row_rb = create_table(row_path, (total,), "int64")
    pos = 0
    for lo in range(0, n_group, CHUNK_ROWS):
        hi = min(lo + CHUNK_ROWS, n_group)
        deg = _degrees(cfg, rel_id, rel, lo, hi)
        owner = torch.repeat_interleave(torch.arange(lo, hi), deg)
        other = _partners(cfg, rel_id, lo, owner, n_other)
        write_rows(row_path, row_off, row_rb, pos, other.numpy())
        pos += other.numel()
        if progress is not None:
            progress(f"{os.path.basename(directory)}", hi, n_group)
    with open(os.path.join(directory, "meta.json"), "w") as f:
        json.dump(dict(num_dst=n_group, num_src=n_other, num_edges=total), f)
    return total


def rel_dir(root: str, edge_type) -> str:
    return os.path.join(root, "__".join(edge_type))


def _reverse_chunks(chunks):
    return lambda: ((src, dst) for dst, src in chunks())


def generate_igbh(root: str, cfg: IGBHConfig | None = None, progress=None,
                  bucket_edges: int = BUCKET_EDGES_DEFAULT) -> "IGBHDataset":
    """Write an IGBH-shaped graph under `root` (see the module doc); progress(what, done, total). A previous
    generation's files in `root` (complete, or cut short) are replaced; files the generator did not write
    are refused (FileExistsError from TensorFile.create), never overwritten."""
    cfg = (cfg or IGBHConfig()).check()
    counts = cfg.num_nodes()
    _claim(root, cfg)
    np_dtype = np.dtype(cfg.dtype)
    for type_id, nt in enumerate(NODE_TYPES):
        os.makedirs(os.path.join(root, nt), exist_ok=True)
        path = os.path.join(root, nt, "node_feat.npy")
        off, rb = create_table(path, (counts[nt], cfg.features), np_dtype)
        for lo in range(0, counts[nt], CHUNK_ROWS):
            hi = min(lo + CHUNK_ROWS, counts[nt])
            write_rows(path, off, rb, lo, feature_chunk(cfg, type_id, lo, hi, cfg.dtype).numpy())
            if progress is not None:
                progress(f"{nt} features", hi, counts[nt])
    path = os.path.join(root, "paper", LABEL_FILE)
    off, rb = create_table(path, (counts["paper"],), "int64")
    for lo in range(0, counts["paper"], CHUNK_ROWS):
        hi = min(lo + CHUNK_ROWS, counts["paper"])
        write_rows(path, off, rb, lo, paper_labels(cfg, lo, hi).numpy())
    edges = {}
    for rel_id, (s, r, d) in enumerate(RELATIONS):
        side = _DEGREES[r][0]
        group, other = (d, s) if side == "dst" else (s, d)
        # grouped by dst: the relation's own CSC; grouped by src: the reverse relation's CSC
        stored = (s, r, d) if side == "dst" else (d, REVERSE[r], s)
        directory = rel_dir(root, stored)
        edges[stored] = _grouped_relation(cfg, rel_id, r, directory, counts[group], counts[other], progress)
        if r in REVERSE:  # the forward relation, grouped by its destination: an out-of-core transpose
            meta = build_csc(_reverse_chunks(csc_chunks(directory)), counts[d], rel_dir(root, (s, r, d)),
                             num_src=counts[s], bucket_edges=bucket_edges)
            edges[(s, r, d)] = meta["num_edges"]
    _write_meta(root, counts, edges, cfg.classes, dict(generator=asdict(cfg)))
    os.remove(os.path.join(root, GENERATING))  # after meta.json: the dataset is complete
    return open_igbh(root)


GENERATING = ".generating"  # in root while generate_igbh writes it: the files there are the generator's


def _claim(root: str, cfg: IGBHConfig) -> None:
    """Make `root` the generator's: when it holds a previous generation (meta.json names a generator, or the
    GENERATING marker shows one cut short), its meta.json goes first (a run cut short now leaves nothing
    that looks complete), then its node-type and relation directories; then the marker is written. A
    generation cut short (a timeout, kill -9) left files that made every later one refuse to start."""
    os.makedirs(root, exist_ok=True)
    meta, marker = os.path.join(root, "meta.json"), os.path.join(root, GENERATING)
    try:
        with open(meta) as f:
            generated = "generator" in json.load(f)
    except (OSError, ValueError):
        generated = False
    if generated or os.path.exists(marker):
        if os.path.exists(meta):
            os.remove(meta)
        for name in os.listdir(root):
            if name in NODE_TYPES or name.count("__") == 2:  # <type>/ and <src>__<rel>__<dst>/
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    with open(marker, "w") as f:
        json.dump(asdict(cfg), f)


def _write_meta(root, counts, edges, classes, extra) -> None:
    meta = dict(node_types=list(counts), num_nodes=counts, num_classes=classes,
                edge_types=[list(et) for et in edges], num_edges={"__".join(et): n for et, n in edges.items()},
                **extra)
    with open(os.path.join(root, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def import_igbh(src: str, root: str, label_file: str = LABEL_FILE, progress=None,
                bucket_edges: int = BUCKET_EDGES_DEFAULT) -> "IGBHDataset":
    """Convert a real IGBH `processed` directory (layout in the module doc) into `root`."""
    from gpuio.graph.csc_file import edge_list_chunks
    if not os.path.isdir(src):
        raise FileNotFoundError(f"IGBH source directory {src!r} does not exist")
    types = sorted(d for d in os.listdir(src) if os.path.exists(os.path.join(src, d, "node_feat.npy")))
    if "paper" not in types:
        raise FileNotFoundError(f"{src}: no paper/node_feat.npy (expected IGBH's processed/ layout)")
    counts = {}
    for nt in types:
        arr = np.load(os.path.join(src, nt, "node_feat.npy"), mmap_mode="r")
        counts[nt] = int(arr.shape[0])
        os.makedirs(os.path.join(root, nt), exist_ok=True)
        path = os.path.join(root, nt, "node_feat.npy")
        flat = arr.reshape(arr.shape[0], -1)
        off, rb = create_table(path, flat.shape, flat.dtype)
        step = max(1, (64 << 20) // max(rb, 1))
        for lo in range(0, flat.shape[0], step):
            write_rows(path, off, rb, lo, np.array(flat[lo:lo + step]))
            if progress is not None:
                progress(f"{nt} features", min(lo + step, flat.shape[0]), flat.shape[0])
    lab_src = os.path.join(src, "paper", label_file)
    if not os.path.exists(lab_src):
        raise FileNotFoundError(f"{lab_src} not found (label_file={label_file!r})")
    labels = np.load(lab_src, mmap_mode="r")
    path = os.path.join(root, "paper", LABEL_FILE)
    off, rb = create_table(path, (labels.shape[0],), "int64")
    classes = 0
    for lo in range(0, labels.shape[0], 1 << 22):
        part = np.array(labels[lo:lo + (1 << 22)]).astype(np.int64).reshape(-1)
        classes = max(classes, int(part.max()) + 1 if part.size else 0)
        write_rows(path, off, rb, lo, part)
    edges = {}
    for name in sorted(os.listdir(src)):
        parts = name.split("__")
        el = os.path.join(src, name, "edge_index.npy")
        if len(parts) != 3 or not os.path.exists(el):
            continue
        s, r, d = parts
        if s not in counts or d not in counts:
            raise ValueError(f"{src}/{name}: node type {s if s not in counts else d!r} has no node_feat.npy")
        edges[(s, r, d)] = build_csc(edge_list_chunks(el), counts[d], rel_dir(root, (s, r, d)), counts[s],
                                     bucket_edges)["num_edges"]
        if s != d or r in REVERSE:  # the reverse, so messages reach the source type too
            rev = (d, REVERSE.get(r, "rev_" + r), s)
            edges[rev] = build_csc(edge_list_chunks(el, reverse=True), counts[s], rel_dir(root, rev), counts[d],
                                   bucket_edges)["num_edges"]
        if progress is not None:
            progress(name, 1, 1)
    _write_meta(root, counts, edges, classes, dict(imported_from=os.path.abspath(src)))
    return open_igbh(root)


class IGBHDataset:
    """An IGBH directory (generated or imported): counts, labels and splits in memory (8 bytes per paper),
    features and structure on storage (paths; the stores open them)."""

    def __init__(self, root: str, split=SPLIT, seed: int = 0):
        with open(os.path.join(root, "meta.json")) as f:
            self.meta = json.load(f)
        self.root = root
        self.node_types = tuple(self.meta["node_types"])
        self.edge_types = tuple(tuple(et) for et in self.meta["edge_types"])
        self.num_nodes = dict(self.meta["num_nodes"])
        self.num_classes = int(self.meta["num_classes"])
        self.y = torch.from_numpy(np.array(np.load(os.path.join(root, "paper", LABEL_FILE), mmap_mode="r")))
        self.train_idx, self.val_idx, self.test_idx = random_split(self.num_nodes["paper"], split, seed)

    def feature_path(self, node_type: str) -> str:
        if node_type not in self.num_nodes:
            raise KeyError(f"no node type {node_type!r}; the dataset has {list(self.node_types)}")
        return os.path.join(self.root, node_type, "node_feat.npy")

    def relation_path(self, edge_type) -> str:
        if tuple(edge_type) not in self.edge_types:
            raise KeyError(f"no edge type {edge_type!r}; the dataset has {list(self.edge_types)}")
        return rel_dir(self.root, edge_type)

    def feature_shape(self, node_type: str) -> tuple:
        return tuple(np.load(self.feature_path(node_type), mmap_mode="r").shape)

    @property
    def num_edges(self) -> int:
        return int(sum(self.meta["num_edges"].values()))

    def feature_bytes(self) -> int:
        return sum(math.prod(self.feature_shape(nt)) * np.load(self.feature_path(nt), mmap_mode="r").itemsize
                   for nt in self.node_types)


def open_igbh(root: str, split=SPLIT, seed: int = 0) -> IGBHDataset:
    if not os.path.exists(os.path.join(root, "meta.json")):
        raise FileNotFoundError(f"{root}: no meta.json (generate with generate_igbh or import_igbh first)")
    return IGBHDataset(root, split, seed)
