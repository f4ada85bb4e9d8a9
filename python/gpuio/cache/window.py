"""Window buffering (GIDS): pages that the next `window` batches will read are protected from eviction.

The loader samples ahead; each sampled-but-not-yet-served batch is announced with `announce(pages)`.
A per-page counter says how many protected announcements still need the page; serving a batch releases
the oldest announcement (`release_oldest`). Protection is by page, whether or not the page is resident
yet, so a page fetched for batch i stays for batch i+3 if batch i+3 was already sampled.

Capacity: the `window` oldest unserved announcements (the batches served soonest) are protected. More
may be announced (a loader sampling `window` batches ahead while its accumulator still holds submitted
batches): they wait unprotected and are protected, in order, as earlier ones are served. So serving
batch i always releases batch i's own announcement, and no announcement is ever dropped. Protected
pages may exceed the cache: the store then installs only what fits in unprotected slots and serves
the rest uncached (bypass); nothing blocks.
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
        self.pending: deque[torch.Tensor] = deque()  # unserved announcements, oldest first
        self.protected = 0  # the first `protected` of pending are counted in future_uses

    @property
    def waiting(self) -> int:
        """Announcements beyond the window: queued, not yet protected."""
        return len(self.pending) - self.protected

    def announce(self, pages: torch.Tensor) -> None:
        """Queue the pages (distinct page ids) of the next unannounced batch; protected once it is among
        the `window` oldest unserved announcements."""
        if self.window == 0:
            return
        self.pending.append(pages)
        self._fill()

    def release_oldest(self) -> None:
        """The oldest announced batch was served: its pages are no longer needed by it."""
        if not self.pending:
            return
        pages = self.pending.popleft()
        if self.protected:
            self.protected -= 1
            self.future_uses[pages] -= 1
        self._fill()

    def _fill(self) -> None:
        while self.protected < min(self.window, len(self.pending)):
            self.future_uses[self.pending[self.protected]] += 1
            self.protected += 1

    def protected_slots(self, slot_page: torch.Tensor) -> torch.Tensor:
        """Bool per slot: its page is needed by a protected announced batch."""
        res = slot_page >= 0
        out = torch.zeros_like(res)
        if self.protected:
            out[res] = self.future_uses[slot_page[res]] > 0
        return out

    def protected_pages(self) -> int:
        return int((self.future_uses > 0).sum()) if self.protected else 0
