"""Heterogeneous graphs on gpuio for PyG: a structure store per relation, features per node type, and a
pure-PyTorch heterogeneous neighbour sampler (PyG's `HeteroSamplerOutput` contract, no pyg-lib).

    graph = HeteroGraphStore.from_dataset(ds, in_memory=False)     # CSC per relation, read on demand
    sampler = HeteroNeighborSampler(graph, num_neighbors=[10, 5], seed=0)
    feats = hetero_feature_store({nt: gpuio.TableCache(tf_nt, ...) for nt in types}, y={"paper": y})
    loader = torch_geometric.loader.NodeLoader((feats, graph), sampler, input_nodes=("paper", idx))

Sampling, per hop and per relation (src, rel, dst) in sorted order: the relation's CSC gives each frontier
node of type dst its in-neighbours of type src; all of them when there are at most k, else k distinct
ones (gpuio.pyg.sampler.sample_positions: the same draws as the homogeneous sampler). New nodes of each
type are numbered in order of first appearance, seeds first; they form the next hop's frontier of their
type. `edge[et]` holds the sampled edges' CSC positions (the relation's edge ids in its CSC file).

Speed (gpuio.pyg.hetero_ops): a hop draws for all relations in one vectorised pass (the same numbers, in
the same order, as relation after relation) and relabels once per node type (the relations' source ids
concatenated in sorted relation order: the same first-appearance numbering), through a dense
global -> local map per node type that is reused across batches (node types above
`dense_relabel_max_nodes` use sorted copies instead).
Thread contract: calls drawing from the sampler's own generator run one at a time; calls that pass
their own `generator` may run concurrently (each takes its own relabel maps).

Other processes: the stores and the sampler pickle as what they are (relation files reopen in the receiver, the
tensors travel) and a forked child inherits them, with locks of its own; the sampler's own generator in a
DataLoader worker is the worker's, as gpuio.pyg.sampler says.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Sequence

import torch
from torch_geometric.data import EdgeAttr
from torch_geometric.data import GraphStore as PygGraphStore
from torch_geometric.sampler import BaseSampler, HeteroSamplerOutput, NodeSamplerInput

from gpuio._forked import ForkAware
from gpuio.graph.csc_file import CSCMemory
from gpuio.pyg.hetero_ops import DenseRelabel, sample_positions_many
from gpuio.pyg.sampler import WorkerGenerator, _Relabel

# node types up to this many nodes are relabelled through a dense map (8 bytes a node, kept per sampling
# thread and reused across batches); larger ones through sorted copies (memory per batch only)
DENSE_RELABEL_MAX_NODES = 1 << 25


class HeteroGraphStore(PygGraphStore):
    """Relations -> CSC structures (`gpuio.graph.CSCFile` on storage, or `CSCMemory`)."""

    def __init__(self, relations: dict | None = None, num_nodes: dict | None = None):
        super().__init__(edge_attr_cls=EdgeAttr)
        self.relations: dict[tuple, object] = {}
        self.num_nodes = dict(num_nodes or {})
        for et, csc in (relations or {}).items():
            self.add_relation(et, csc)

    @classmethod
    def from_dataset(cls, ds, in_memory: bool = False, cache_bytes: int | None = None, device=None,
                     edge_types=None) -> "HeteroGraphStore":
        """Every relation of an `IGBHDataset`; in_memory=True loads the CSCs, else they are read on demand
        through page caches sharing `cache_bytes` in all (default gpuio.graph.csc_file's), shared out over the
        relations' files by `split_struct_cache` (pointer files whole first, then the lists by file size)."""
        from gpuio.graph.csc_file import STRUCT_CACHE_BYTES_DEFAULT, open_csc, relation_file_bytes, split_struct_cache
        ets = ds.edge_types if edge_types is None else [tuple(e) for e in edge_types]
        paths = [ds.relation_path(et) for et in ets]
        budget = STRUCT_CACHE_BYTES_DEFAULT if cache_bytes is None else cache_bytes
        shares = [0] * len(ets) if in_memory else split_struct_cache(budget, [relation_file_bytes(p) for p in paths])
        return cls({et: open_csc(p, in_memory, share, device) for et, p, share in zip(ets, paths, shares)},
                   ds.num_nodes)

    def add_relation(self, edge_type, csc) -> None:
        """Add (or replace) relation `edge_type` = (src, rel, dst) with CSC structure `csc`. ValueError when
        the type is not a triple or `csc.num_dst` disagrees with the known node count of type dst."""
        et = tuple(edge_type)
        if len(et) != 3:
            raise ValueError(f"an edge type is (src, rel, dst), got {edge_type!r}")
        if et[2] in self.num_nodes and csc.num_dst != self.num_nodes[et[2]]:
            raise ValueError(f"{et}: its CSC has {csc.num_dst} destinations, node type {et[2]!r} has "
                             f"{self.num_nodes[et[2]]} nodes")
        self.num_nodes.setdefault(et[2], csc.num_dst)
        self.relations[et] = csc

    # -- PyG GraphStore contract ---------------------------------------------------------------
    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        """PyG's GraphStore contract: one sorted-CSC `EdgeAttr` per relation, sized (num src, num dst)."""
        return [EdgeAttr(et, "csc", True, (self.num_nodes.get(et[0]), self.num_nodes.get(et[2])))
                for et in self.relations]

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        from gpuio.graph.csc_file import CSCMemory
        from gpuio.graph.csc import csc_from_edge_index
        layout = edge_attr.layout.value
        if layout == "csc":
            row, colptr = edge_index
            csc = CSCMemory(colptr, row)
        elif layout == "coo":
            src, dst = edge_index
            n = edge_attr.size[1] if edge_attr.size is not None else None
            c = csc_from_edge_index(torch.stack([dst.long(), src.long()]), n)  # rows grouped by dst
            order = torch.argsort(dst.long(), stable=True)
            csc = CSCMemory(c.colptr, src.long()[order])
        else:
            raise ValueError(f"layout must be 'csc' or 'coo', got {layout!r}")
        self.add_relation(edge_attr.edge_type, csc)
        return True

    def _get_edge_index(self, edge_attr: EdgeAttr):
        csc = self.relations.get(tuple(edge_attr.edge_type))
        if csc is None:
            return None
        colptr, row = csc.tensors()
        return row, colptr

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        return self.relations.pop(tuple(edge_attr.edge_type), None) is not None

    def stats(self) -> dict:
        """Per relation ("src__rel__dst"), its structure's stats (bytes_from_device, page hit rates)."""
        return {"__".join(et): c.stats() for et, c in self.relations.items()}


def hetero_feature_store(tables: dict, y: dict | None = None, attr: str = "x"):
    """A `gpuio.pyg.PygFeatureStore` with group = node type: `tables[nt]` (a gpuio.TableCache per type,
    with its own GPU cache / host buffer / window, or any row source) as attribute `attr`, plus label
    tensors `y[nt]` as attribute "y"."""
    from gpuio.pyg.feature_store import PygFeatureStore
    fs = PygFeatureStore()
    for nt, table in tables.items():
        fs.put_tensor(table, group_name=nt, attr_name=attr, index=None)
    for nt, labels in (y or {}).items():
        fs.put_tensor(labels, group_name=nt, attr_name="y", index=None)
    return fs


class HeteroNeighborSampler(BaseSampler, ForkAware):
    """`HeteroNeighborSampler(graph, num_neighbors=[10, 5], replace=False, seed=None)`.

    graph: a `HeteroGraphStore` (or a dict edge type -> CSC structure). num_neighbors: per hop, one list
    for all relations, or a dict edge type -> list (same length for every type). Sampling runs where the
    structures deliver (their device)."""

    def __init__(self, graph, num_neighbors: Sequence[int] | dict = (10, 5), replace: bool = False,
                 seed: int | None = None, dense_relabel_max_nodes: int = DENSE_RELABEL_MAX_NODES):
        self.graph = graph if isinstance(graph, HeteroGraphStore) else HeteroGraphStore(graph)
        self.edge_types = sorted(self.graph.relations)
        if not self.edge_types:
            raise ValueError("the graph store holds no relations")
        fan = num_neighbors if isinstance(num_neighbors, dict) else {et: num_neighbors for et in self.edge_types}
        missing = [et for et in self.edge_types if et not in fan]
        if missing:
            raise ValueError(f"num_neighbors names no fan-out for edge types {missing}")
        hops = {len(v) for v in fan.values()}
        if len(hops) != 1 or 0 in hops:
            raise ValueError(f"every edge type needs the same non-zero number of hops, got {sorted(hops)}")
        for et, ks in fan.items():
            if any((not isinstance(k, int)) or k == 0 or k < -1 for k in ks):
                raise ValueError(f"num_neighbors[{et}] must hold ints > 0 or -1, got {list(ks)!r}")
        self.num_neighbors = {et: list(fan[et]) for et in self.edge_types}
        self.num_hops = hops.pop()
        self.replace = bool(replace)
        self.device = self.graph.relations[self.edge_types[0]].device
        self.seed = int(seed) if seed is not None else torch.seed()
        self._generators = WorkerGenerator(self.seed, self.device)
        if dense_relabel_max_nodes < 0:
            raise ValueError(f"dense_relabel_max_nodes must be >= 0, got {dense_relabel_max_nodes}")
        self.dense_relabel_max_nodes = dense_relabel_max_nodes
        self._process_state()

    def _process_state(self) -> None:
        """Locks and relabel maps: this process's own (made anew after a fork and on arrival)."""
        self._free_tables: list = []
        self._lock = threading.Lock()
        # structures read through caches (CSCFile) take one sampling thread at a time; tensors need no lock
        shared = all(isinstance(c, CSCMemory) for c in self.graph.relations.values())
        self._io_shared_state = not shared
        self._io_lock = contextlib.nullcontext() if shared else threading.Lock()
        self._opened_here()

    def _after_fork(self) -> None:
        self._process_state()  # a parent thread may have held the locks, or a relabel map, at the fork

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_free_tables", "_lock", "_io_lock")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._process_state()

    @property
    def generator(self) -> torch.Generator:
        """The generator this process draws from (in a DataLoader worker: the worker's own)."""
        return self._generators.get()

    def sample(self, seeds: torch.Tensor, input_type: str,
               generator: torch.Generator | None = None) -> HeteroSamplerOutput:
        """Sample `num_hops` hops around `seeds` (node ids of type `input_type`; see the module docstring),
        drawing from `generator` (default: the sampler's own). KeyError for an unknown node type,
        IndexError for a seed outside [0, num nodes of that type)."""
        self._this_process()
        if input_type not in self.graph.num_nodes:
            raise KeyError(f"no node type {input_type!r}; the graph has {sorted(self.graph.num_nodes)}")
        n_in = self.graph.num_nodes[input_type]
        seeds = torch.as_tensor(seeds).to(self.device, torch.long).flatten()
        if seeds.numel() and (int(seeds.min()) < 0 or int(seeds.max()) >= n_in):
            raise IndexError(f"seed node ids must lie in [0, {n_in}), got min {int(seeds.min())}, "
                             f"max {int(seeds.max())}")
        gen = self.generator if generator is None else generator
        tables = self._take_tables()
        try:
            return self._sample(seeds, input_type, gen, tables)
        finally:
            self._give_tables(tables)

    @contextlib.contextmanager
    def _structure_reads(self):
        """One thread at a time reads structures kept behind caches; on CUDA its stream finishes before the
        next thread's stream may touch those caches."""
        with self._io_lock:
            yield
            if self._io_shared_state and self.device.type == "cuda":
                torch.cuda.current_stream(self.device).synchronize()

    def _take_tables(self) -> dict:
        """Dense relabel maps (node type -> int64 [n] of -1) for one call: a free set, or a new one."""
        with self._lock:
            if self._free_tables:
                return self._free_tables.pop()
        return {nt: torch.full((n,), -1, dtype=torch.long, device=self.device)
                for nt, n in self.graph.num_nodes.items() if n <= self.dense_relabel_max_nodes}

    def _give_tables(self, tables: dict) -> None:
        if self.device.type == "cuda":  # their reset is done before another thread's stream may take them
            torch.cuda.current_stream(self.device).synchronize()
        with self._lock:
            self._free_tables.append(tables)

    def _sample(self, seeds, input_type, gen, tables) -> HeteroSamplerOutput:
        empty = torch.empty(0, dtype=torch.long, device=self.device)
        types = sorted(self.graph.num_nodes)
        relabel = {}
        for nt in types:
            first = seeds if nt == input_type else empty
            relabel[nt] = DenseRelabel(tables[nt], first) if nt in tables else _Relabel(first)
        try:
            return self._hops(seeds, input_type, gen, relabel, types, empty)
        finally:
            for r in relabel.values():
                if isinstance(r, DenseRelabel):
                    r.release()

    def _hops(self, seeds, input_type, gen, relabel, types, empty) -> HeteroSamplerOutput:
        frontier = {input_type: (seeds, torch.arange(seeds.numel(), device=self.device))}
        rows = {et: [] for et in self.edge_types}
        cols = {et: [] for et in self.edge_types}
        edges = {et: [] for et in self.edge_types}
        n_nodes = {nt: [seeds.numel() if nt == input_type else 0] for nt in types}
        n_edges = {et: [] for et in self.edge_types}
        for hop in range(self.num_hops):
            active = [et for et in self.edge_types if et[2] in frontier and frontier[et[2]][0].numel()]
            with self._structure_reads():
                ptrs = [self.graph.relations[et].ptr(frontier[et[2]][0]) for et in active]
            drawn = sample_positions_many([p[0] for p in ptrs], [p[1] for p in ptrs],
                                          [self.num_neighbors[et][hop] for et in active], self.replace, gen)
            src_ids: dict[str, list] = {}
            with self._structure_reads():
                got = [self.graph.relations[et].rows(pos) for et, (pos, _) in zip(active, drawn)]
            for et, (pos, owner), src in zip(active, drawn, got):
                src_ids.setdefault(et[0], []).append(src)
                cols[et].append(frontier[et[2]][1].index_select(0, owner))
                edges[et].append(pos)
            counts = dict(zip(active, (int(p.numel()) for p, _ in drawn)))
            for et in self.edge_types:
                n_edges[et].append(counts.get(et, 0))
            frontier = {}
            for nt in types:
                parts = src_ids.get(nt)
                new = empty
                if parts:  # one relabel per node type: the relations' ids in sorted relation order
                    local, new = relabel[nt].lookup_or_add(torch.cat(parts) if len(parts) > 1 else parts[0])
                    ets = [et for et in active if et[0] == nt]
                    for et, part in zip(ets, torch.split(local, [int(p.numel()) for p in parts])):
                        rows[et].append(part)
                n_nodes[nt].append(int(new.numel()))
                if new.numel():
                    first = relabel[nt].count - new.numel()
                    frontier[nt] = (new, first + torch.arange(new.numel(), device=self.device))
        cat = (lambda xs: torch.cat(xs) if xs else empty)
        return HeteroSamplerOutput(
            node={nt: torch.cat(relabel[nt].nodes) for nt in types},
            row={et: cat(rows[et]) for et in self.edge_types}, col={et: cat(cols[et]) for et in self.edge_types},
            edge={et: cat(edges[et]) for et in self.edge_types}, batch=None,
            num_sampled_nodes=n_nodes, num_sampled_edges=n_edges)

    def sample_from_nodes(self, index: NodeSamplerInput, generator: torch.Generator | None = None,
                          **kwargs) -> HeteroSamplerOutput:
        """PyG's BaseSampler contract (NodeLoader): `sample(index.node, index.input_type, generator)` with the
        input ids and times as metadata. ValueError when the input has no node type."""
        if index.input_type is None:
            raise ValueError("heterogeneous sampling needs the input node type (input_nodes=(type, ids))")
        out = self.sample(index.node, index.input_type, generator)
        out.metadata = (index.input_id, index.time)
        return out

    def sample_from_edges(self, index, neg_sampling=None):
        """Not supported: raises NotImplementedError (this sampler samples from nodes only)."""
        raise NotImplementedError("gpuio.pyg.HeteroNeighborSampler samples from nodes only")

    @property
    def edge_permutation(self):
        """None: the output's `edge` already holds the relations' CSC positions (their edge ids)."""
        return None

__all__ = ["DENSE_RELABEL_MAX_NODES", "HeteroGraphStore", "hetero_feature_store", "HeteroNeighborSampler"]
