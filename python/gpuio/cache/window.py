"""Window buffering (GIDS): what the next `window` batches will read, and when — the page cache's
eviction and admission use it the way Belady's MIN uses the future (TableCache._serve).

The loader samples ahead; each sampled-but-not-yet-served batch is announced with `announce(pages)` and
gets the next sequence number. Per page the window keeps `next_use`: the sequence number of the soonest
protected announcement that needs the page (NO_USE when none). Serving a batch releases the oldest
announcement (`release_oldest`); its pages' next use moves to their next protected announcement. A
page's next use is known whether or not the page is resident yet, so a page fetched for batch i stays
for batch i+3 if batch i+3 was already sampled and nothing sooner needs its slot.

Capacity: the `window` oldest unserved announcements (the batches served soonest) are protected. More
may be announced (a loader sampling `window` batches ahead while its accumulator still holds submitted
batches): they wait, unknown to next_use, and are protected, in order, as earlier ones are served. So
serving batch i always releases batch i's own announcement, and no announcement is ever dropped.
Protected pages may exceed the cache: the store then keeps the pages needed soonest and serves the
others uncached (bypass); nothing blocks.
"""
from __future__ import annotations

from collections import deque

import torch

from gpuio.cache.page_cache import NO_USE  # next_use of a page no protected announcement needs


class WindowBuffer:
    def __init__(self, num_pages: int, window: int, device):
        if window < 0:
            raise ValueError(f"window must be >= 0 batches, got {window}")
        self.window = window
        self.device = torch.device(device)
        self.next_use = torch.full((num_pages,), NO_USE, dtype=torch.long, device=self.device)
        self.pending: deque[tuple[torch.Tensor, torch.Tensor]] = deque()  # unserved (sequence per page, pages)
        self.protected = 0  # the first `protected` of pending are known to next_use
        self.announced = 0  # sequence number of the next announcement

    @property
    def waiting(self) -> int:
        """Announcements beyond the window: queued, not yet protected."""
        return len(self.pending) - self.protected

    def announce(self, pages: torch.Tensor) -> None:
        """Queue the pages (distinct page ids) of the next unannounced batch; protected once it is among
        the `window` oldest unserved announcements."""
        if self.window == 0:
            return
        # each page's sequence number beside it: a release gathers them without a host-to-device copy
        self.pending.append((torch.full_like(pages, self.announced, dtype=torch.long), pages))
        self.announced += 1
        self._fill()

    def release_oldest(self) -> None:
        """The oldest announced batch was served: its pages' next use is their next protected
        announcement (one scatter-min over the protected announcements' pages, no per-page loop)."""
        if not self.pending:
            return
        _, pages = self.pending.popleft()
        if self.protected:
            self.protected -= 1
            self.next_use[pages] = NO_USE
            if self.protected and pages.numel():
                later = [self.pending[i] for i in range(self.protected)]
                ids = torch.cat([p for _, p in later])
                seq = torch.cat([s for s, _ in later])
                # the released pages are the only NO_USE ones among the protected announcements' pages;
                # the others keep their sooner use (amin with NO_USE), so no mask-compaction sync either
                seq = torch.where(self.next_use[ids] == NO_USE, seq, NO_USE)
                self.next_use.scatter_reduce_(0, ids, seq, "amin")
        self._fill()

    def _fill(self) -> None:
        while self.protected < min(self.window, len(self.pending)):
            seq, pages = self.pending[self.protected]
            # sequence numbers grow: a page already needed by a protected announcement keeps its sooner one
            self.next_use[pages] = torch.minimum(self.next_use[pages], seq)
            self.protected += 1

    def slot_next_use(self, slot_page: torch.Tensor) -> torch.Tensor:
        """next_use of each slot's page (NO_USE for empty slots)."""
        return torch.where(slot_page >= 0, self.next_use[slot_page.clamp(min=0)],
                           torch.full_like(slot_page, NO_USE))

    def protected_pages(self) -> int:
        return int((self.next_use < NO_USE).sum()) if self.protected else 0

__all__ = ["WindowBuffer"]
