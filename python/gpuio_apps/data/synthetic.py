"""Synthetic power-law graphs (R-MAT) with learnable labels, features written out of core.

R-MAT (Chakrabarti et al.) drops each edge into a quadrant of the adjacency matrix, recursively, with
probabilities (a, b, c, d); a > d gives a heavy-tailed degree distribution and makes nodes with close ids
link more often. Labels are contiguous id ranges, so that locality makes neighbourhoods informative; a
row's features are its class centroid plus Gaussian noise, generated in chunks from (seed, chunk), so a
table far larger than memory is written with bounded memory and the same seed gives the same bytes.
"""
from __future__ import annotations

import math

import torch

from gpuio.graph.graph_data import GraphData, coalesce_undirected, random_split

WRITE_ROWS_MAX = 1 << 16  # rows generated and written per step: bounds memory while writing features


def rmat_edges(num_nodes: int, num_edges: int, seed: int = 0, abc=(0.57, 0.19, 0.19)) -> torch.Tensor:
    """num_edges directed R-MAT edges over [0, num_nodes) (ids folded into range), int64 [2, E]."""
    if num_nodes < 2 or num_edges < 1:
        raise ValueError(f"need num_nodes >= 2 and num_edges >= 1, got {num_nodes}, {num_edges}")
    a, b, c = abc
    if min(a, b, c) < 0 or a + b + c >= 1:
        raise ValueError(f"R-MAT probabilities a, b, c must be >= 0 with a + b + c < 1, got {abc}")
    g = torch.Generator().manual_seed(seed)
    scale = math.ceil(math.log2(num_nodes))
    src = torch.zeros(num_edges, dtype=torch.long)
    dst = torch.zeros(num_edges, dtype=torch.long)
    for level in range(scale):
        r = torch.rand(num_edges, generator=g)
        bit = 1 << (scale - 1 - level)
        src += (r >= a + b).long() * bit
        dst += (((r >= a) & (r < a + b)) | (r >= a + b + c)).long() * bit
    return torch.stack([src % num_nodes, dst % num_nodes])


def feature_rows(start: int, stop: int, y: torch.Tensor, num_features: int, num_classes: int,
                 seed: int, noise: float = 1.0) -> torch.Tensor:
    """Rows [start, stop) of the feature table: class centroid + noise, reproducible per chunk."""
    centroids = torch.randn(num_classes, num_features, generator=torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(seed * 1_000_003 + start)
    return centroids[y[start:stop]] + noise * torch.randn(stop - start, num_features, generator=g)


def synthetic_graph(path, num_nodes: int = 10_000, num_edges: int = 100_000, num_features: int = 64,
                    num_classes: int = 8, seed: int = 0, noise: float = 4.0, split=(0.5, 0.1, 0.2),
                    progress=None, **tensor_file_options) -> GraphData:
    """R-MAT graph of num_nodes/num_edges (undirected, deduplicated), labels, splits, and float32
    features written into a new `gpuio.TensorFile` at `path` (tensor_file_options go to TensorFile.create:
    an existing file is replaced only with overwrite=True). progress(rows_done, rows_total) is called
    after each chunk."""
    from gpuio.tensor import TensorFile
    if num_features < 1 or num_classes < 2:
        raise ValueError(f"need num_features >= 1 and num_classes >= 2, got {num_features}, {num_classes}")
    edge_index = coalesce_undirected(rmat_edges(num_nodes, num_edges, seed), num_nodes)
    y = torch.arange(num_nodes) * num_classes // num_nodes
    tf = TensorFile.create(path, (num_nodes, num_features), "float32", **tensor_file_options)
    for lo in range(0, num_nodes, WRITE_ROWS_MAX):
        hi = min(lo + WRITE_ROWS_MAX, num_nodes)
        tf.scatter(torch.arange(lo, hi), feature_rows(lo, hi, y, num_features, num_classes, seed, noise))
        if progress is not None:
            progress(hi, num_nodes)
    train, val, test = random_split(num_nodes, split, seed)
    return GraphData(edge_index, y, num_classes, train, val, test, tf, name=f"rmat-{num_nodes}")
