"""Storage-access accumulator (GIDS, CAM): hold back small batches until their misses, merged, put
enough requests in flight to reach the device's bandwidth, then serve them with one read.

A 4 KiB random read reaches full IOPS only at a deep queue (≈ 2 workers × QD128 on the GPU machine);
a micro-batch whose misses are a few dozen pages leaves the device idle. The accumulator only decides
*when* to flush; the feature store does the merged lookup and read.
"""
from __future__ import annotations

from gpuio.defaults import knob

INFLIGHT_PAGES_MIN = knob("cache.inflight_pages_min").default  # ≈ 2 workers × QD128: 4 KiB random reads saturate
ACCUMULATE_BATCHES_MAX = 8  # never hold more micro-batches than this (bounds latency and memory)


class Accumulator:
    def __init__(self, enabled: bool, inflight_pages_min: int = INFLIGHT_PAGES_MIN,
                 batches_max: int = ACCUMULATE_BATCHES_MAX):
        if inflight_pages_min < 1 or batches_max < 1:
            raise ValueError(f"inflight_pages_min and batches_max must be >= 1, "
                             f"got {inflight_pages_min}, {batches_max}")
        self.enabled = enabled
        self.inflight_pages_min = inflight_pages_min
        self.batches_max = batches_max
        self.pending: list = []  # tickets not yet served, in submission order
        self.pending_miss_pages = 0  # estimate: misses of pending batches when they were submitted

    def add(self, ticket, miss_pages: int) -> bool:
        """Queue a ticket; True when the queue should be flushed now."""
        self.pending.append(ticket)
        self.pending_miss_pages += miss_pages
        if not self.enabled:
            return True
        return self.pending_miss_pages >= self.inflight_pages_min or len(self.pending) >= self.batches_max

    def take(self) -> list:
        out, self.pending, self.pending_miss_pages = self.pending, [], 0
        return out

__all__ = ["INFLIGHT_PAGES_MIN", "ACCUMULATE_BATCHES_MAX", "Accumulator"]
