"""Row tables that are not a TensorFile: the baselines the GNN demo compares against, and anything a
`gpuio.FeatureStore` can sit on. A row source has `shape`, `torch_dtype`, `block_size`, `num_rows` and
`gather(idx) -> rows on idx.device`, like `gpuio.TensorFile`.
"""
from __future__ import annotations

import mmap

import numpy as np
import torch

from gpuio._index import check_ids


def _check_idx(idx, num_rows: int) -> torch.Tensor:
    idx = check_ids(idx, "row ids", upper=num_rows)
    return (idx if isinstance(idx, torch.Tensor) else torch.from_numpy(idx)).flatten()


class InMemoryRows:
    """Rows held in a tensor (the demo's upper bound: features already in memory)."""

    def __init__(self, table: torch.Tensor, block_size: int = 4096):
        self.table = table
        self.block_size = block_size

    @property
    def shape(self):
        return tuple(self.table.shape)

    @property
    def num_rows(self) -> int:
        return self.table.shape[0]

    @property
    def torch_dtype(self):
        return self.table.dtype

    def gather(self, idx) -> torch.Tensor:
        idx = _check_idx(idx, self.num_rows)
        return self.table.index_select(0, idx.to(self.table.device)).to(idx.device)


class MemmapRows:
    """Rows read through `np.load(mmap_mode='r')` and fancy indexing (DGL's/GIDS's mmap baseline)."""

    def __init__(self, path, block_size: int = 4096, random_access: bool = False):
        """random_access: madvise(MADV_RANDOM) on the mapping, so a fault reads its page and no readahead
        (default off, as DGL's loader runs; on, mmap is the kinder baseline out of core: with the page cache
        a fraction of the file, readahead reads mostly pages evicted before use)."""
        self.array = np.load(path, mmap_mode="r")
        if self.array.ndim < 1:
            raise ValueError(f"{path}: a row table needs at least 1 dimension, got shape {self.array.shape}")
        self.random_access = bool(random_access and hasattr(mmap, "MADV_RANDOM"))
        if self.random_access:
            self.array._mmap.madvise(mmap.MADV_RANDOM)
        self.block_size = block_size
        self.torch_dtype = torch.from_numpy(np.empty(0, dtype=self.array.dtype)).dtype

    @property
    def shape(self):
        return tuple(self.array.shape)

    @property
    def num_rows(self) -> int:
        return self.array.shape[0]

    def gather(self, idx) -> torch.Tensor:
        idx = _check_idx(idx, self.num_rows)
        rows = torch.from_numpy(np.ascontiguousarray(self.array[idx.cpu().numpy()]))
        return rows.to(idx.device)


class ZeroRows:
    """Features that cost nothing to fetch: zeros of the right shape on the device (compute alone, warm-up)."""

    def __init__(self, shape, device):
        self.shape, self.device, self.torch_dtype, self.block_size = tuple(shape), device, torch.float32, 4096

    @property
    def num_rows(self) -> int:
        return self.shape[0]

    def gather(self, idx) -> torch.Tensor:
        return torch.zeros((idx.numel(), *self.shape[1:]), device=self.device)
