"""Constant host buffer (GIDS): the hottest rows, loaded once, held in host memory for the whole run.

With CUDA the buffer is pinned, so rows reach the GPU by DMA without a staging copy. (GIDS maps it so
GPU threads read it in place; torch has no kernel that indexes mapped host memory, so here the CPU
gathers the requested hot rows into a pinned buffer and the copy engine moves them: same bytes over PCIe,
one extra host-side gather.) Rows in the buffer never enter the GPU page cache, so the two tiers add up.
"""
from __future__ import annotations

import torch

_LOAD_ROWS_MAX = 65536  # rows per read while filling the buffer: bounds the staging memory at start


class HostBuffer:
    def __init__(self, source, rows: torch.Tensor, num_rows: int, index_device):
        """source: a row table with gather(idx) -> rows; rows: ids to hold (distinct, in range)."""
        rows = rows.to("cpu", torch.long)
        self.rows = rows
        pin = torch.cuda.is_available()
        shape = (rows.numel(), *source.shape[1:])
        self.data = torch.empty(shape, dtype=source.torch_dtype, pin_memory=pin)
        for lo in range(0, rows.numel(), _LOAD_ROWS_MAX):
            self.data[lo:lo + _LOAD_ROWS_MAX] = source.gather(rows[lo:lo + _LOAD_ROWS_MAX])
        # row id -> position in the buffer, -1 when not held; lives where lookups run.
        self.row_slot = torch.full((num_rows,), -1, dtype=torch.int32, device=index_device)
        self.row_slot[rows.to(index_device)] = torch.arange(rows.numel(), dtype=torch.int32,
                                                            device=index_device)

    @property
    def num_rows(self) -> int:
        return int(self.rows.numel())

    def lookup(self, rows: torch.Tensor) -> torch.Tensor:
        """Buffer position of each row (int64), -1 where the row is not held."""
        return self.row_slot[rows].long()

    def read(self, slots: torch.Tensor, device) -> torch.Tensor:
        """Rows at buffer positions `slots`, delivered on `device`."""
        out = self.data.index_select(0, slots.cpu())
        if torch.device(device).type == "cuda":
            out = out.pin_memory().to(device, non_blocking=True)
        return out


def pick_hot_rows(num_rows: int, count: int, hot_scores=None) -> torch.Tensor:
    """The `count` rows with the highest `hot_scores` (one per row; gpuio.graph.degree_scores or
    pagerank_scores rank a graph's nodes)."""
    if count < 0:
        raise ValueError(f"host_cache_rows must be >= 0, got {count}")
    count = min(count, num_rows)
    if count == 0:
        return torch.empty(0, dtype=torch.long)
    if hot_scores is None:
        raise ValueError("host_cache_rows > 0 needs hot_scores (one per row: gpuio.graph.degree_scores(graph) or "
                         "gpuio.graph.pagerank_scores(graph) rank a graph's nodes)")
    scores = torch.as_tensor(hot_scores).to("cpu", torch.double).flatten()
    if scores.numel() != num_rows:
        raise ValueError(f"hot_scores has {scores.numel()} entries, the table has {num_rows} rows")
    return torch.topk(scores, count).indices.sort().values
