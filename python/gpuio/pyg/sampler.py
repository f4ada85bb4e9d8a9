"""Pure-PyTorch multi-hop neighbour sampler implementing PyG's `BaseSampler`.

PyG's own `NeighborSampler` needs pyg-lib or torch-sparse (compiled, not served on PyPI for current
PyTorch); this one is plain tensor ops, so it runs wherever the graph tensors live: on the GPU (as GIDS
samples) or on the CPU. `torch_geometric.loader.NodeLoader(data=(feature_store, graph_store),
node_sampler=NeighborSampler(...), input_nodes=...)` works with no extra packages.

Per hop and per frontier node: all in-neighbours when there are at most `k`, else `k` distinct ones
drawn uniformly (Floyd's algorithm, vectorised over the frontier: k steps, each one tensor op over all
nodes), or `k` draws with replacement when `replace=True`. Sampled nodes are relabelled in order of first
appearance, seeds first, so `node[:batch_size]` are the seeds (PyG's contract).

Thread contract: calls drawing from the sampler's own generator run one at a time (it is shared state);
calls that pass their own `generator` may run concurrently. gpuio's loaders that sample in several threads or
worker processes give batch i a generator of its own (gpuio.loader.batch_generator), so their batches do not
depend on how many sample them.

Other processes: a sampler pickles as what it is (graph tensors, fan-outs, generator state) and a forked child
inherits it. In a DataLoader worker (PyG's loaders with num_workers) the sampler draws from a generator of that
worker's own, seeded from the sampler's seed and the worker's (`get_worker_info().seed`, which DataLoader derives
from the main process's torch seed), as DataLoader seeds torch in its workers: workers draw independently, and a
seeded run repeats. A sampler on CUDA refuses to sample in a forked child of a process that used CUDA
(gpuio.gpu.BAD_FORK, at once).
"""
from __future__ import annotations

import os
from typing import Sequence

import torch
from torch_geometric.sampler import BaseSampler, NodeSamplerInput, SamplerOutput

from gpuio.gpu import refuse_bad_fork
from gpuio.graph.csc import CSC, to_csc
from gpuio.loader import batch_generator

class WorkerGenerator:
    """A sampler's generator, or in a DataLoader worker process one of that worker's own (see the module
    docstring). `get()` returns the generator to draw from in this process."""

    def __init__(self, seed: int, device):
        self.seed, self.device = int(seed), torch.device(device)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(self.seed)
        self._pid = os.getpid()

    def __getstate__(self) -> dict:
        # The state as bytes: torch pickles a Generator with a temporary state tensor, whose shared-memory descriptor
        # is closed before a spawned process (a DataLoader worker) can map it.
        state = bytes(self.generator.get_state().numpy())
        return dict(seed=self.seed, device=str(self.device), state=state, pid=self._pid)

    def __setstate__(self, st: dict) -> None:
        self.seed, self.device, self._pid = st["seed"], torch.device(st["device"]), st["pid"]
        self.generator = torch.Generator(device=self.device)
        self.generator.set_state(torch.frombuffer(bytearray(st["state"]), dtype=torch.uint8))

    def get(self) -> torch.Generator:
        """The generator to draw from in this process (BAD_FORK's RuntimeError for a CUDA one in a bad fork)."""
        if self._pid != os.getpid():
            if self.device.type == "cuda":
                refuse_bad_fork()
            self._pid = os.getpid()
            from torch.utils.data import get_worker_info
            info = get_worker_info()
            if info is not None:
                self.generator = batch_generator(self.seed, info.seed, self.device)
        return self.generator


def _floyd_sample(deg: torch.Tensor, k: int, gen: torch.Generator) -> torch.Tensor:
    """k distinct offsets in [0, deg) per row, for rows with deg > k. Returns int64 [n, k]."""
    n = deg.numel()
    chosen = torch.empty((n, k), dtype=torch.long, device=deg.device)
    for i in range(k):
        j = deg - k + i  # Floyd: draw t in [0, j]; if already taken, take j (never taken before)
        t = (torch.rand(n, generator=gen, device=deg.device) * (j + 1).double()).long().clamp_max(j)
        if i:
            taken = (chosen[:, :i] == t[:, None]).any(1)
            t = torch.where(taken, j, t)
        chosen[:, i] = t
    return chosen


def sample_hop(csc: CSC, frontier: torch.Tensor, k: int, replace: bool,
               gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample in-edges of `frontier`. Returns (csc positions of sampled edges, index into frontier)."""
    start = csc.colptr[frontier]
    return sample_positions(start, csc.colptr[frontier + 1] - start, k, replace, gen)


def sample_positions(start: torch.Tensor, deg: torch.Tensor, k: int, replace: bool,
                     gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """`sample_hop` given each frontier node's first CSC position and in-degree (so the column pointers
    may come from anywhere: memory or a file). Returns (positions, index into the frontier)."""
    dev = start.device
    if k < 0:
        take_all = torch.ones_like(deg, dtype=torch.bool)
    elif replace:
        take_all = torch.zeros_like(deg, dtype=torch.bool)
    else:
        take_all = deg <= k
    # Rows that keep every in-edge: expand [start, start + deg) with repeat_interleave.
    all_idx = take_all.nonzero().flatten()
    all_deg = deg[all_idx]
    owner_all = torch.repeat_interleave(all_idx, all_deg)
    first = torch.cumsum(all_deg, 0) - all_deg
    within = torch.arange(int(all_deg.sum()), device=dev) - torch.repeat_interleave(first, all_deg)
    pos_all = start[owner_all] + within
    # Rows that sample k of their in-edges.
    some_idx = (~take_all & (deg > 0)).nonzero().flatten()
    if some_idx.numel() and k > 0:
        some_deg = deg[some_idx]
        if replace:
            off = (torch.rand((some_idx.numel(), k), generator=gen, device=dev)
                   * some_deg[:, None].double()).long().clamp_max(some_deg[:, None] - 1)
        else:
            off = _floyd_sample(some_deg, k, gen)
        pos_some = (start[some_idx][:, None] + off).flatten()
        owner_some = some_idx.repeat_interleave(k)
    else:
        pos_some = torch.empty(0, dtype=torch.long, device=dev)
        owner_some = pos_some
    pos = torch.cat([pos_all, pos_some])
    owner = torch.cat([owner_all, owner_some])
    order = torch.argsort(owner, stable=True)  # group edges by frontier node: stable output order
    return pos[order], owner[order]


class _Relabel:
    """Global -> local ids, in order of first appearance; search in a sorted copy (no O(num_nodes) map)."""

    def __init__(self, seeds: torch.Tensor):
        self.nodes = [seeds]
        self.count = seeds.numel()
        self.sorted_ids, order = torch.sort(seeds, stable=True)
        self.sorted_local = order

    def lookup_or_add(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Local ids of `ids`, adding unseen ones. Returns (local ids, newly added global ids)."""
        pos = torch.searchsorted(self.sorted_ids, ids).clamp_max(max(self.sorted_ids.numel() - 1, 0))
        found = self.sorted_ids.numel() > 0
        known = (self.sorted_ids[pos] == ids) if found else torch.zeros_like(ids, dtype=torch.bool)
        local = torch.empty_like(ids)
        if found:
            local[known] = self.sorted_local[pos[known]]
        new_ids = ids[~known]
        uniq, inv = torch.unique(new_ids, return_inverse=True)
        first_seen = torch.full((uniq.numel(),), new_ids.numel(), dtype=torch.long, device=ids.device)
        first_seen.scatter_reduce_(0, inv, torch.arange(new_ids.numel(), device=ids.device), "amin")
        order = torch.argsort(first_seen)
        added = uniq[order]
        rank = torch.empty_like(order)
        rank[order] = torch.arange(order.numel(), device=ids.device)
        local[~known] = self.count + rank[inv]
        self.nodes.append(added)
        merged_ids = torch.cat([self.sorted_ids, added])
        merged_local = torch.cat([self.sorted_local,
                                  self.count + torch.arange(added.numel(), device=ids.device)])
        self.sorted_ids, o = torch.sort(merged_ids, stable=True)
        self.sorted_local = merged_local[o]
        self.count += added.numel()
        return local, added


class NeighborSampler(BaseSampler):
    """`NeighborSampler(graph, num_neighbors=(25, 10), replace=False, seed=None, device=None)`.

    graph: an `edge_index` tensor [2, E], a `gpuio.graph.CSC`, a PyG `Data`, or a `gpuio.pyg.GraphStore`.
    device: where the graph lives and sampling runs (default: the graph's device); with CUDA, pass
    device="cuda" to sample on the GPU. Outputs are on that device.
    """

    def __init__(self, graph, num_neighbors: Sequence[int] = (25, 10), replace: bool = False,
                 seed: int | None = None, device=None, num_nodes: int | None = None):
        if not num_neighbors or any((not isinstance(k, int)) or k == 0 or k < -1 for k in num_neighbors):
            raise ValueError(f"num_neighbors must be a non-empty list of ints > 0 or -1, got {num_neighbors!r}")
        self.csc = to_csc(graph, num_nodes)
        if device is not None:
            self.csc = self.csc.to(torch.device(device))
        self.device = self.csc.colptr.device
        self.num_neighbors = list(num_neighbors)
        self.replace = bool(replace)
        self.seed = int(seed) if seed is not None else torch.seed()
        self._generators = WorkerGenerator(self.seed, self.device)

    @property
    def generator(self) -> torch.Generator:
        """The generator this process draws from (in a DataLoader worker: the worker's own; see the module
        docstring)."""
        return self._generators.get()

    @property
    def num_nodes(self) -> int:
        """Nodes of the sampled graph."""
        return self.csc.num_nodes

    def sample(self, seeds: torch.Tensor, generator: torch.Generator | None = None) -> SamplerOutput:
        """Sample the multi-hop neighbourhood of seeds (int64 node ids), drawing from `generator` (default: the
        sampler's own); IndexError for an id outside [0, num_nodes)."""
        gen = self.generator if generator is None else generator
        seeds = torch.as_tensor(seeds).to(self.device, torch.long).flatten()
        if seeds.numel() and (int(seeds.min()) < 0 or int(seeds.max()) >= self.num_nodes):
            raise IndexError(f"seed node ids must lie in [0, {self.num_nodes}), "
                             f"got min {int(seeds.min())}, max {int(seeds.max())}")
        relabel = _Relabel(seeds)
        frontier, frontier_local = seeds, torch.arange(seeds.numel(), device=self.device)
        rows, cols, edges = [], [], []
        nodes_per_hop, edges_per_hop = [seeds.numel()], []
        for k in self.num_neighbors:
            pos, owner = sample_hop(self.csc, frontier, k, self.replace, gen)
            src = self.csc.row[pos]
            src_local, added = relabel.lookup_or_add(src)
            rows.append(src_local)
            cols.append(frontier_local[owner])
            edges.append(self.csc.perm[pos])
            nodes_per_hop.append(added.numel())
            edges_per_hop.append(pos.numel())
            frontier = added
            frontier_local = relabel.count - added.numel() + torch.arange(added.numel(), device=self.device)
        return SamplerOutput(node=torch.cat(relabel.nodes), row=torch.cat(rows), col=torch.cat(cols),
                             edge=torch.cat(edges), num_sampled_nodes=nodes_per_hop,
                             num_sampled_edges=edges_per_hop)

    def sample_from_nodes(self, index: NodeSamplerInput, generator: torch.Generator | None = None,
                          **kwargs) -> SamplerOutput:
        """PyG's BaseSampler entry: sample(index.node, generator), with the input ids kept as metadata."""
        out = self.sample(index.node, generator)
        out.metadata = (index.input_id, index.time)
        return out

    def sample_from_edges(self, index, neg_sampling=None):
        """Not supported: NotImplementedError (link-prediction sampling)."""
        raise NotImplementedError("gpuio.pyg.NeighborSampler samples from nodes only (link-prediction "
                                  "sampling from edges is not implemented)")

    @property
    def edge_permutation(self):
        """None: the output's edge ids are already the caller's edge ids."""
        return None  # `edge` already holds original edge ids

__all__ = ["WorkerGenerator", "sample_hop", "sample_positions", "NeighborSampler"]
