"""`GraphData`: what a node-classification job needs — edges, labels, splits, and a feature table — and the two
edge-list and node-set helpers the dataset loaders (gpuio_apps.data) build it with."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class GraphData:
    """A node-classification graph: `edge_index`, labels `y`, the train/val/test node ids, and the feature
    table (any row source with `shape` and `gather`)."""

    edge_index: torch.Tensor  # int64 [2, E], both directions present for undirected graphs
    y: torch.Tensor  # int64 [N] class labels
    num_classes: int
    train_idx: torch.Tensor
    val_idx: torch.Tensor
    test_idx: torch.Tensor
    features: object  # a row source: gpuio.TensorFile, gpuio.cache.InMemoryRows, ...
    name: str = "graph"

    @property
    def num_nodes(self) -> int:
        """Nodes of the graph (one label each)."""
        return int(self.y.numel())

    @property
    def num_features(self) -> int:
        """Columns of the feature table."""
        return int(self.features.shape[1])


def coalesce_undirected(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Both directions of every edge, duplicates and self-loops removed, sorted by (dst, src)."""
    src, dst = edge_index
    src, dst = torch.cat([src, dst]), torch.cat([dst, src])
    keep = src != dst
    key = torch.unique(dst[keep] * num_nodes + src[keep])
    return torch.stack([key % num_nodes, key // num_nodes])


def random_split(num_nodes: int, fractions: tuple, seed: int):
    """Disjoint train/val/test node ids drawn with `seed`, sizes from `fractions` (sum <= 1)."""
    if len(fractions) != 3 or sum(fractions) > 1 + 1e-9 or min(fractions) < 0:
        raise ValueError(f"fractions must be 3 non-negative numbers summing to <= 1, got {fractions}")
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(num_nodes, generator=g)
    a = int(fractions[0] * num_nodes)
    b = a + int(fractions[1] * num_nodes)
    c = b + int(fractions[2] * num_nodes)
    return perm[:a].sort().values, perm[a:b].sort().values, perm[b:c].sort().values

__all__ = ["GraphData", "coalesce_undirected", "random_split"]
