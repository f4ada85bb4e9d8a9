"""Which blocks hold which rows of a table (TensorFile's planning, pure tensor arithmetic on the host): rows of
`row_bytes` packed back to back from data block 0, blocks of `block_size` bytes."""
from __future__ import annotations

import torch


def plan(rows: torch.Tensor, row_bytes: int, block_size: int, itemsize: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Distinct blocks holding `rows` (sorted, data-relative) and each row's element offset in the
    concatenation of those blocks. A row spanning blocks finds them adjacent there, since they are
    consecutive ids and all present."""
    bs, rb = block_size, row_bytes
    start = rows.cpu() * rb
    first = start // bs
    if bs % max(rb, 1) == 0:  # rows never straddle blocks: the block list is unique(first)
        blocks, inv = torch.unique(first, return_inverse=True)
        return blocks, (inv * bs + start % bs) // itemsize
    if rb % bs == 0:  # whole-block rows: the rows' distinct ids give the blocks
        k = rb // bs
        uniq, inv = torch.unique(rows.cpu(), return_inverse=True)
        return (uniq[:, None] * k + torch.arange(k)).flatten(), inv * (rb // itemsize)
    span = (start + max(rb, 1) - 1) // bs - first + 1
    k = int(span.max())
    cand = first[:, None] + torch.arange(k)
    blocks = torch.unique(cand[torch.arange(k) < span[:, None]])
    pos = (torch.searchsorted(blocks, first) * bs + start % bs) // itemsize
    return blocks, pos


def fully_covered(rows: torch.Tensor, blocks: torch.Tensor, row_bytes: int, block_size: int,
                  data_bytes: int) -> torch.Tensor:
    """Bool per block of `blocks`: distinct `rows` cover all its bytes (no need to read it first).
    Bytes past the end of the data (data_bytes) count as covered (they are padding)."""
    bs, rb = block_size, row_bytes
    start = rows * rb
    end = start + rb
    first = start // bs
    k = int(((end - 1) // bs - first).max()) + 1
    cand = first[:, None] + torch.arange(k)
    lo = torch.maximum(cand * bs, start[:, None])
    hi = torch.minimum((cand + 1) * bs, end[:, None])
    valid = hi > lo
    covered = torch.zeros(blocks.numel(), dtype=torch.long)
    covered.index_add_(0, torch.searchsorted(blocks, cand[valid]), (hi - lo)[valid])
    need = torch.clamp(data_bytes - blocks * bs, max=bs)
    return covered >= need
