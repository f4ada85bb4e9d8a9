"""The row tables the demos and benchmarks compare gpuio's against, as `gpuio.rows.Rows` (shape, torch_dtype,
block_size, num_rows, gather): `MemmapRows`, DGL's and GIDS's np.memmap loader, and `ZeroRows`, features that cost
nothing to fetch (compute alone, warm-up). Not part of the library: its own in-memory table is gpuio.rows.InMemoryRows.

Other processes: `ZeroRows` pickles as its shape; `MemmapRows` as its path and options (the receiver maps the file
again: the table is never copied into the pickle); a forked child shares the mapping.
"""
from __future__ import annotations

import mmap

import numpy as np
import torch

from gpuio.rows import check_row_ids


class MemmapRows:
    """Rows read through `np.load(mmap_mode='r')` and fancy indexing (DGL's/GIDS's mmap baseline)."""

    def __init__(self, path, block_size: int = 4096, random_access: bool = False):
        """random_access: madvise(MADV_RANDOM) on the mapping, so a fault reads its page and no readahead
        (default off, as DGL's loader runs; on, mmap is the kinder baseline out of core: with the page cache
        a fraction of the file, readahead reads mostly pages evicted before use)."""
        self.path = path
        self.array = np.load(path, mmap_mode="r")
        if self.array.ndim < 1:
            raise ValueError(f"{path}: a row table needs at least 1 dimension, got shape {self.array.shape}")
        mapping = self.array.base  # np.memmap's buffer: the mmap.mmap of the file
        self.random_access = bool(random_access and hasattr(mmap, "MADV_RANDOM") and isinstance(mapping, mmap.mmap))
        if self.random_access:
            mapping.madvise(mmap.MADV_RANDOM)
        self.block_size = block_size
        self.torch_dtype = torch.from_numpy(np.empty(0, dtype=self.array.dtype)).dtype

    def __reduce__(self):
        return (MemmapRows, (self.path, self.block_size, self.random_access))

    @property
    def shape(self):
        """(rows, *row_shape) of the .npy file."""
        return tuple(self.array.shape)

    @property
    def num_rows(self) -> int:
        """shape[0]."""
        return self.array.shape[0]

    def gather(self, idx) -> torch.Tensor:
        """Rows idx read through the mapping (page faults; readahead unless random_access), on idx's device."""
        idx = check_row_ids(idx, self.num_rows)
        rows = torch.from_numpy(np.ascontiguousarray(self.array[idx.cpu().numpy()]))
        return rows.to(idx.device)


class ZeroRows:
    """Features that cost nothing to fetch: zeros of the right shape on the device (compute alone, warm-up)."""

    def __init__(self, shape, device):
        self.shape, self.device, self.torch_dtype, self.block_size = tuple(shape), device, torch.float32, 4096

    @property
    def num_rows(self) -> int:
        """shape[0]."""
        return self.shape[0]

    def gather(self, idx) -> torch.Tensor:
        """Zeros of shape (len(idx), *shape[1:]) on the table's device."""
        return torch.zeros((idx.numel(), *self.shape[1:]), device=self.device)


__all__ = ["MemmapRows", "ZeroRows"]
