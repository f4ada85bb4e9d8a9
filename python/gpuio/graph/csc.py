"""Compressed sparse column (CSC) form of a graph: for each destination node, its incoming edges.

Neighbour sampling walks edges backwards from the seeds (messages flow source -> destination, PyG's
default), so the sampler needs, per destination, the contiguous list of sources; `perm` maps each
CSC position back to the edge's position in the caller's edge_index (PyG's `e_id`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch


@dataclass
class CSC:
    """The CSC of a graph: per destination node, the contiguous list of its in-edges' source nodes."""
    colptr: torch.Tensor  # int64 [num_nodes + 1]
    row: torch.Tensor  # int64 [num_edges], source node of each edge, grouped by destination
    perm: torch.Tensor  # int64 [num_edges], CSC position -> original edge id
    num_nodes: int

    @property
    def num_edges(self) -> int:
        """Edges in the graph (len(row))."""
        return int(self.row.numel())

    def in_degree(self) -> torch.Tensor:
        """In-degree of every node, int64 [num_nodes]."""
        return self.colptr[1:] - self.colptr[:-1]

    def to(self, device, pin_memory: bool = False) -> "CSC":
        """The same CSC on device (pin_memory: page-locked when it stays on the CPU)."""
        def move(t):
            t = t.to(device)
            return t.pin_memory() if pin_memory and t.device.type == "cpu" else t
        return CSC(move(self.colptr), move(self.row), move(self.perm), self.num_nodes)


def csc_from_edge_index(edge_index: torch.Tensor, num_nodes: int | None = None) -> CSC:
    """The CSC of an edge_index [2, E] (sources, destinations): stable by destination, so each node's in-edges keep
    the caller's order; perm maps CSC positions to edge ids. IndexError for node ids outside [0, num_nodes)."""
    if not isinstance(edge_index, torch.Tensor):
        raise TypeError(f"edge_index must be a torch.Tensor, got {type(edge_index).__name__}")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must have shape [2, num_edges], got {tuple(edge_index.shape)}")
    edge_index = edge_index.long()
    if num_nodes is None:
        num_nodes = int(edge_index.max()) + 1 if edge_index.numel() else 0
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise IndexError(f"edge_index holds node ids outside [0, {num_nodes}): "
                         f"min {int(edge_index.min())}, max {int(edge_index.max())}")
    src, dst = edge_index[0], edge_index[1]
    # Stable sort keeps the caller's edge order within one destination: deterministic sampling.
    perm = torch.argsort(dst, stable=True)
    counts = torch.bincount(dst, minlength=num_nodes)
    colptr = torch.zeros(num_nodes + 1, dtype=torch.long, device=edge_index.device)
    colptr[1:] = torch.cumsum(counts, 0)
    return CSC(colptr, src[perm].contiguous(), perm, num_nodes)


@runtime_checkable
class SupportsCSC(Protocol):
    """A graph that hands out its CSC (gpuio.pyg.GraphStore)."""

    def gpuio_csc(self) -> CSC:
        """The graph as a CSC."""
        ...


@runtime_checkable
class EdgeIndexGraph(Protocol):
    """A graph given by its edges (PyG's Data): edge_index [2, E] and num_nodes."""

    edge_index: Any
    num_nodes: Any


def to_csc(graph: Any, num_nodes: int | None = None) -> CSC:
    """The CSC of any graph form the package accepts: a CSC, an edge_index tensor [2, E], a PyG Data (its
    edge_index and num_nodes), or an object with gpuio_csc() (gpuio.pyg.GraphStore). TypeError otherwise."""
    if isinstance(graph, CSC):
        return graph
    if isinstance(graph, torch.Tensor):
        return csc_from_edge_index(graph, num_nodes)
    if isinstance(graph, SupportsCSC):  # gpuio.pyg.GraphStore
        return graph.gpuio_csc()
    if isinstance(graph, EdgeIndexGraph) and isinstance(graph.edge_index, torch.Tensor):
        return csc_from_edge_index(graph.edge_index, num_nodes if num_nodes is not None else graph.num_nodes)
    raise TypeError(f"graph must be an edge_index tensor, CSC, Data or gpuio.pyg.GraphStore, "
                    f"got {type(graph).__name__}")

__all__ = ["CSC", "csc_from_edge_index", "SupportsCSC", "EdgeIndexGraph", "to_csc"]
