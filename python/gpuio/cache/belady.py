"""Belady's MIN: the fewest storage reads any cache of a given capacity could have done for a recorded
access sequence (the offline optimum the feature stores are judged against).

A trace is the list of each served group's requested row ids (one tensor per group — a batch, or the
batches a store's accumulator merged into one read — in serving order; `record_served` records it).
It becomes a sequence of page accesses — a group's distinct pages, ascending — where a page is
`page_rows` consecutive rows, the unit a `gpuio.FeatureStore` reads. MIN, with bypass: on a miss, if the
cache is full, drop whichever of the resident pages and the missing page is next used farthest in the
future (never again counts as farthest); that choice is optimal for every capacity (Belady 1966, with
Mattson et al.'s bypass form). Misses include the first touch of each page (the cache starts empty, as
the stores do).
"""
from __future__ import annotations

import heapq

import numpy as np
import torch


def record_served(store) -> list:
    """Record what a `gpuio.FeatureStore` serves: appends, per served group (one flush: the batches its
    accumulator merged, read with one request), the requested row ids. That is the trace MIN must see
    — pages a group reads once serve every batch of the group, cached or not. (Hooks the store's
    `_serve`; a public trace hook in gpuio.cache.feature_store would replace this.)"""
    trace: list = []
    serve = store._serve

    def traced(tickets):
        trace.append(torch.cat([t.rows for t in tickets]).cpu())
        return serve(tickets)
    store._serve = traced
    return trace


def page_sequence(trace, page_rows: int = 1) -> np.ndarray:
    """Flatten a trace into page accesses: per batch its distinct pages (ascending), batches in order."""
    if page_rows < 1:
        raise ValueError(f"page_rows must be >= 1, got {page_rows}")
    parts = [np.unique(torch.as_tensor(t).cpu().numpy().astype(np.int64) // page_rows) for t in trace]
    return np.concatenate(parts) if parts else np.empty(0, np.int64)


def next_use(seq: np.ndarray) -> np.ndarray:
    """For each access, the position of the next access to the same page (len(seq) when none)."""
    n = seq.size
    order = np.argsort(seq, kind="stable")
    s = seq[order]
    nxt = np.full(n, n, dtype=np.int64)
    same = s[1:] == s[:-1]
    nxt[order[:-1][same]] = order[1:][same]
    return nxt


def min_misses(seq: np.ndarray, capacity: int) -> int:
    """Misses of the optimal cache of `capacity` pages on the page-access sequence `seq`."""
    if capacity < 0:
        raise ValueError(f"capacity must be >= 0 pages, got {capacity}")
    seq = np.asarray(seq, dtype=np.int64)
    n = seq.size
    if capacity == 0:
        return int(n)
    nxt = next_use(seq).tolist()
    resident: dict[int, int] = {}  # page -> its next use
    heap: list = []  # (-next use, page), stale entries skipped lazily
    misses = 0
    for i, p in enumerate(seq.tolist()):
        nu = nxt[i]
        if p in resident:
            resident[p] = nu
            heapq.heappush(heap, (-nu, p))
            continue
        misses += 1
        if len(resident) < capacity:
            resident[p] = nu
            heapq.heappush(heap, (-nu, p))
            continue
        while True:
            neg, q = heap[0]
            if resident.get(q) == -neg:
                break
            heapq.heappop(heap)
        if -neg > nu:  # a resident page is needed later than this one: evict it, keep this one
            heapq.heappop(heap)
            del resident[q]
            resident[p] = nu
            heapq.heappush(heap, (-nu, p))
        # else: bypass (this page is the one needed farthest in the future)
    return misses


def min_bytes(trace, capacity_pages: int, page_rows: int, page_bytes: int) -> int:
    """Bytes the optimal cache of `capacity_pages` reads from storage for `trace`."""
    return min_misses(page_sequence(trace, page_rows), capacity_pages) * page_bytes


def store_vs_min(store, trace) -> dict:
    """A `gpuio.FeatureStore`'s storage bytes against MIN on the same trace, for the same capacity.

    gpuio's bytes are the blocks its table actually read (host buffer fill + page reads; the table's
    counters, else the store's page bytes + host rows). MIN gets the device cache's slots plus one page
    per host-buffer row: exactly the store's capacity when a row fills a page (rows of >= 1 block, as
    1024-dim features), more than it when several rows share a page (the host buffer holds single rows)
    — so MIN stays a lower bound on what any policy with these tiers could read, and the ratio is >= 1."""
    s = store.stats()
    host_rows = s["host_rows"]
    storage = s.get("storage", {})
    if "bytes_read" in storage:
        got = storage["bytes_read"]
    else:
        got = s["bytes_from_device"] + host_rows * store.row_bytes
    capacity = s["cache_slots"] + host_rows
    opt = min_bytes(trace, capacity, store.page_rows, store.page_bytes)
    return dict(gpuio_bytes=int(got), min_bytes=opt, capacity_pages=capacity,
                ratio=got / opt if opt else (1.0 if got == 0 else float("inf")))
