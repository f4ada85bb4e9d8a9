"""Hotness scores for the cache's constant host buffer (`gpuio.TableCache(hot_scores=...)`): degree or
PageRank of the graph, as GIDS ranks rows."""
from __future__ import annotations

import torch

from gpuio.graph.csc import to_csc


def _edges(graph, num_nodes=None) -> tuple[torch.Tensor, torch.Tensor, int]:
    csc = to_csc(graph, num_nodes)  # one parser for every graph form the package accepts
    dst = torch.repeat_interleave(torch.arange(csc.num_nodes, device=csc.row.device), csc.in_degree())
    return csc.row, dst, csc.num_nodes


def degree_scores(graph, num_nodes: int | None = None) -> torch.Tensor:
    """Edges leaving each node (source side): how many neighbourhoods its row can be sampled into."""
    src, _, n = _edges(graph, num_nodes)
    return torch.bincount(src, minlength=n).double()


def pagerank_scores(graph, num_nodes: int | None = None, damping: float = 0.85, iters: int = 20) -> torch.Tensor:
    """Power-iteration PageRank over the edge list (dangling mass spread uniformly)."""
    if not 0.0 < damping < 1.0:
        raise ValueError(f"damping must lie in (0, 1), got {damping}")
    src, dst, n = _edges(graph, num_nodes)
    out_deg = torch.bincount(src, minlength=n).double()
    rank = torch.full((n,), 1.0 / max(n, 1), dtype=torch.double, device=src.device)
    for _ in range(iters):
        share = rank / out_deg.clamp_min(1)
        nxt = torch.zeros_like(rank).index_add_(0, dst, share[src])
        dangling = rank[out_deg == 0].sum()
        rank = (1 - damping) / n + damping * (nxt + dangling / n)
    return rank

__all__ = ["degree_scores", "pagerank_scores"]
