"""BFS, connected components and SSSP on an out-of-core CSR graph, frontier by frontier: each round expands the
frontier's adjacency ranges (row_ptr in memory on the device) into edge positions, asks an EdgeSource for the
neighbours (and weights) and updates the vertex state with torch ops. One implementation for every device and
every source; results are checked against SciPy (small graphs) or Graph500's BFS tree rules (large ones).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .csr import CSRGraph

MAX_EDGES = 1 << 26  # edge positions fetched per call (bounds idx/neighbour memory: ~1.5 GiB at 2^26)


def expand(row_ptr: torch.Tensor, frontier: torch.Tensor, max_edges: int = MAX_EDGES):
    """Yields (source vertex of each edge, edge position) for the frontier's adjacency, ascending, in chunks of
    at most max_edges edges (a vertex of higher degree forms a chunk of its own)."""
    if frontier.numel() == 0:
        return
    starts = row_ptr[frontier]
    deg = row_ptr[frontier + 1] - starts
    cum = torch.cumsum(deg, 0)
    total = int(cum[-1])
    if total == 0:
        return
    if total <= max_edges:
        cuts = [0, frontier.numel()]
    else:
        marks = torch.arange(max_edges, total, max_edges, device=cum.device)
        inner = torch.searchsorted(cum, marks, right=True).tolist()
        cuts = sorted(set([0, *[c for c in inner if 0 < c < frontier.numel()], frontier.numel()]))
    for a, b in zip(cuts[:-1], cuts[1:]):
        dg = deg[a:b]
        n = int(cum[b - 1] - (cum[a - 1] if a else 0))
        if n == 0:
            continue
        local = torch.repeat_interleave(torch.arange(b - a, device=dg.device), dg, output_size=n)
        first = torch.cumsum(dg, 0) - dg
        idx = starts[a:b][local] + (torch.arange(n, device=dg.device) - first[local])
        yield frontier[a:b][local], idx


def bfs(row_ptr: torch.Tensor, source, root: int, max_edges: int = MAX_EDGES):
    """Level-synchronous top-down BFS. Returns (level int64 [-1: unreached], parent int64 [-1], stats)."""
    n = row_ptr.numel() - 1
    dev = row_ptr.device
    if not 0 <= root < n:
        raise IndexError(f"root={root} outside [0, {n})")
    level = torch.full((n,), -1, dtype=torch.int64, device=dev)
    parent = torch.full((n,), -1, dtype=torch.int64, device=dev)
    level[root], parent[root] = 0, root
    frontier = torch.tensor([root], device=dev)
    depth, edges = 0, 0
    while frontier.numel():
        found = []
        for src, idx in expand(row_ptr, frontier, max_edges):
            nbr, _ = source.fetch(idx, False)
            new = level[nbr] < 0
            v, p = nbr[new], src[new]
            level[v] = depth + 1
            parent[v] = p  # among duplicates one wins: every candidate is a valid parent (level depth)
            found.append(v)
            edges += idx.numel()
        frontier = torch.unique(torch.cat(found)) if found else frontier[:0]
        depth += 1
    return level, parent, dict(rounds=depth, edges_read=edges)


def connected_components(row_ptr: torch.Tensor, source, max_edges: int = MAX_EDGES):
    """Label propagation (each component ends labelled by its smallest vertex id). Returns (labels, stats)."""
    n = row_ptr.numel() - 1
    dev = row_ptr.device
    labels = torch.arange(n, device=dev)
    frontier = torch.nonzero(row_ptr[1:] > row_ptr[:-1]).flatten()
    rounds, edges = 0, 0
    while frontier.numel():
        old = labels.clone()
        for src, idx in expand(row_ptr, frontier, max_edges):
            nbr, _ = source.fetch(idx, False)
            labels.scatter_reduce_(0, nbr, labels[src], "amin")
            edges += idx.numel()
        frontier = torch.nonzero(labels != old).flatten()
        rounds += 1
    return labels, dict(rounds=rounds, edges_read=edges)


WINDOW_CACHE_SHARE = 0.8  # sssp's window: at most this share of the source's cache (per array) holds its ranges


def sssp_window(source, max_edges: int = MAX_EDGES) -> int:
    """How many ranges of max_edges edges (4-byte neighbours and weights) the source's cache holds, with slack:
    0 for sources without a cache (pread+copy, memmap: a repeat would read storage again)."""
    per_array = getattr(source, "cache_bytes_per_array", 0)
    return int(WINDOW_CACHE_SHARE * per_array // (max_edges * 4))


def vertex_ranges(row_ptr: torch.Tensor, max_edges: int = MAX_EDGES) -> list[tuple[int, int]]:
    """Consecutive vertex ranges [lo, hi) of about max_edges edges each (a vertex of higher degree alone)."""
    n = row_ptr.numel() - 1
    marks = torch.arange(0, int(row_ptr[-1]), max_edges, device=row_ptr.device, dtype=row_ptr.dtype)
    cuts = sorted(set([0, *torch.searchsorted(row_ptr, marks).clamp(max=n).tolist(), n]))
    return list(zip(cuts[:-1], cuts[1:]))


def sssp(row_ptr: torch.Tensor, source, root: int, max_edges: int = MAX_EDGES, window: int | None = None):
    """Label-correcting SSSP on float32 weights, swept in vertex order (Gauss-Seidel): each sweep visits the
    vertex ranges of about max_edges edges in ascending order and relaxes the out-edges of the range's dirty
    vertices (those whose distance fell since their last relaxation), so a vertex improved by an earlier
    range is relaxed later in the same sweep, not a round later as in frontier Bellman-Ford (which took 16
    rounds, 4.7-4.8 x the edges, on Kronecker graphs of scale 16 and 20 with these weights: as many rounds as
    the shortest-path tree has hops, plus one; at scale 26 it was cut at 200 s after 16 rounds, each round
    reading nearly every page of both arrays). After each range, the last `window` ranges (this one
    included) are relaxed again until they hold no dirty vertex: their pages are still in the device array's
    cache when `window` ranges of edges and weights fit in it, so these repeats add no storage reads.
    window=None: as many as the source's cache holds (sssp_window; 0 for a source without a cache). On those
    graphs: 11 sweeps at window 0 or 1, 8-10 at window 3-4 (scale 20); at scale 26 every sweep but the last
    few touches most pages. Returns (dist float32 [inf: unreached], stats: rounds = sweeps, window)."""
    n = row_ptr.numel() - 1
    dev = row_ptr.device
    if not 0 <= root < n:
        raise IndexError(f"root={root} outside [0, {n})")
    if window is None:
        window = sssp_window(source, max_edges)
    if not isinstance(window, int) or window < 0:
        raise ValueError(f"window={window!r} must be an int >= 0")
    dist = torch.full((n,), math.inf, dtype=torch.float32, device=dev)
    dist[root] = 0
    dirty = torch.zeros(n, dtype=torch.bool, device=dev)
    dirty[root] = True
    ranges = vertex_ranges(row_ptr, max_edges)
    st = dict(rounds=0, edges_read=0, relax_steps=0, window=window)

    def relax(lo: int, hi: int) -> int:
        f = torch.nonzero(dirty[lo:hi]).flatten() + lo
        if f.numel() == 0:
            return 0
        dirty[f] = False
        st["relax_steps"] += 1
        for src, idx in expand(row_ptr, f, max_edges):
            nbr, w = source.fetch(idx, True)
            before = dist[nbr]
            dist.scatter_reduce_(0, nbr, dist[src] + w, "amin")
            dirty[nbr[dist[nbr] < before]] = True
            st["edges_read"] += idx.numel()
        return f.numel()

    while bool(dirty.any()):
        for r, (lo, hi) in enumerate(ranges):
            relax(lo, hi)
            while window and sum([relax(*ranges[q]) for q in range(max(0, r - window + 1), r + 1)]):
                pass
        st["rounds"] += 1
    return dist, st


# -- checks ------------------------------------------------------------------------------------------------------
def scipy_reference(g: CSRGraph, root: int) -> dict:
    """BFS levels, CC labels (smallest id per component) and SSSP distances from SciPy (small graphs)."""
    from scipy.sparse import csgraph

    a = g.to_scipy()
    hops = csgraph.shortest_path(a, unweighted=True, indices=root, directed=True)
    level = np.where(np.isinf(hops), -1, hops).astype(np.int64)
    _, comp = csgraph.connected_components(a, directed=False)
    smallest = np.full(comp.max() + 1, g.num_nodes, np.int64)
    np.minimum.at(smallest, comp, np.arange(g.num_nodes))
    dist = csgraph.dijkstra(a, indices=root, directed=True)
    return dict(level=level, labels=smallest[comp], dist=dist)


def _edge_ranges(g: CSRGraph, chunk: int, dev, weights: bool = False):
    """The graph's edges streamed from storage in vertex ranges of about `chunk` edges: (first vertex, end vertex,
    src, dst, weights or None) per non-empty range, on `dev` (the validators' one pass over the edges)."""
    col = g.edges("col")
    wt = g.edges("weight") if weights else None
    rp = g.row_ptr
    v = 0
    while v < g.num_nodes:
        hi = int(np.searchsorted(rp, rp[v] + chunk, side="right")) - 1
        hi = min(max(hi, v + 1), g.num_nodes)
        lo_e, hi_e = int(rp[v]), int(rp[hi])
        if hi_e > lo_e:
            dst = torch.from_numpy(np.array(col[lo_e:hi_e])).to(dev).long()
            src = torch.repeat_interleave(torch.arange(v, hi, device=dev),
                                          torch.from_numpy(np.diff(rp[v:hi + 1])).to(dev))
            w = torch.from_numpy(np.array(wt[lo_e:hi_e])).to(dev) if weights else None
            yield v, hi, src, dst, w
        v = hi


def validate_bfs(g: CSRGraph, root: int, level: torch.Tensor, parent: torch.Tensor, chunk: int = 1 << 26) -> list:
    """Graph500's BFS checks, streaming the edges from storage: the root is its own parent at level 0; every
    edge joins vertices whose levels differ by at most one, or two unreached ones; every reached vertex but the
    root has a parent one level up joined to it by an edge. Returns the violations found (empty: valid)."""
    dev = level.device
    errors = []
    if int(parent[root]) != root or int(level[root]) != 0:
        errors.append(f"root {root}: parent {int(parent[root])}, level {int(level[root])}")
    reached = level >= 0
    if bool((reached != (parent >= 0)).any()):
        errors.append(f"{int((reached != (parent >= 0)).sum())} vertices have a level but no parent or vice versa")
    tree_edge = torch.zeros_like(reached)
    for v, hi, src, dst, _ in _edge_ranges(g, chunk, dev):
        ls, ld = level[src], level[dst]
        both = (ls >= 0) & (ld >= 0)
        if bool((both & ((ls - ld).abs() > 1)).any()):
            errors.append(f"vertices {v}..{hi}: an edge joins levels more than one apart")
        if bool(((ls >= 0) != (ld >= 0)).any()):
            errors.append(f"vertices {v}..{hi}: an edge joins a reached and an unreached vertex")
        is_tree = (parent[dst] == src) & (ld == ls + 1)
        tree_edge[dst[is_tree]] = True
    missing = reached & ~tree_edge
    missing[root] = False
    if bool(missing.any()):
        errors.append(f"{int(missing.sum())} reached vertices lack a tree edge from a parent one level up "
                      f"(e.g. {int(torch.nonzero(missing)[0])})")
    return errors


def validate_sssp(g: CSRGraph, root: int, dist: torch.Tensor, chunk: int = 1 << 26) -> list:
    """SSSP checks in the manner of Graph500's, streaming edges and weights from storage (float32 arithmetic,
    as computed): dist[root] is 0; no edge (u, v, w) with u reached relaxes v further (dist[v] <= dist[u] + w,
    so v is reached too); every reached vertex but the root has a tight in-edge (dist[v] == dist[u] + w). With
    weights > 0 the tight edges then lead back to the root, each vertex at the length of such a path, and no
    shorter one exists. Returns the violations found (empty: valid)."""
    dev = dist.device
    errors = []
    if float(dist[root]) != 0.0:
        errors.append(f"root {root}: distance {float(dist[root])}")
    if bool((dist < 0).any()) or bool(torch.isnan(dist).any()):
        errors.append("negative or NaN distances")
    tight = torch.zeros(dist.numel(), dtype=torch.bool, device=dev)
    for v, hi, src, dst, w in _edge_ranges(g, chunk, dev, weights=True):
        via = dist[src] + w  # inf for unreached sources
        if bool((via < dist[dst]).any()):
            errors.append(f"vertices {v}..{hi}: an edge still relaxes a distance (or reaches an unreached vertex)")
        hit = torch.isfinite(via) & (via == dist[dst])
        tight[dst[hit]] = True
    missing = torch.isfinite(dist) & ~tight
    missing[root] = False
    if bool(missing.any()):
        errors.append(f"{int(missing.sum())} reached vertices have no tight in-edge "
                      f"(e.g. {int(torch.nonzero(missing)[0])})")
    return errors
