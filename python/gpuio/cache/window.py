"""Window buffering (GIDS): pages that the next `window` batches will read are protected from eviction.

The loader samples ahead; each sampled-but-not-yet-served batch is announced with `announce(pages)`.
A per-page counter says how many announced batches still need the page; serving a batch releases the
oldest announcement (`release_oldest`). Protection is by page, whether or not the page is resident yet,
so a page fetched for batch i stays for batch i+3 if batch i+3 was already sampled.
"""
from __future__ import annotations

from collections import deque

import torch


class WindowBuffer:
    def __init__(self, num_pages: int, window: int, device):
        if window < 0:
            raise ValueError(f"window must be >= 0 batches, got {window}")
        self.window = window
        self.future_uses = torch.zeros(num_pages, dtype=torch.int32, device=device)
        self.pending: deque[torch.Tensor] = deque()
        self.dropped = 0  # announcements released unserved because more than `window` were queued

    def announce(self, pages: torch.Tensor) -> None:
        """Protect `pages` (distinct page ids) until the batch that needs them is served."""
        if self.window == 0:
            return
        if len(self.pending) == self.window:
            self._release(self.pending.popleft())
            self.dropped += 1
        self.pending.append(pages)
        self.future_uses[pages] += 1

    def release_oldest(self) -> None:
        if self.pending:
            self._release(self.pending.popleft())

    def _release(self, pages: torch.Tensor) -> None:
        self.future_uses[pages] -= 1

    def protected_slots(self, slot_page: torch.Tensor) -> torch.Tensor:
        """Bool per slot: its page is needed by an announced batch."""
        res = slot_page >= 0
        out = torch.zeros_like(res)
        if self.pending:
            out[res] = self.future_uses[slot_page[res]] > 0
        return out

    def protected_pages(self) -> int:
        return int((self.future_uses > 0).sum()) if self.pending else 0
