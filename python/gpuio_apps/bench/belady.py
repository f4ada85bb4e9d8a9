"""Belady's MIN: the fewest storage reads any cache of a given capacity could have done for a recorded
access sequence (the offline optimum the feature stores are judged against).

A trace is the list of each served group's requested row ids (one tensor per group — a batch, or the
batches a store's accumulator merged into one read — in serving order; `record_served` records it); a
page is `page_rows` consecutive rows, the unit a `gpuio.TableCache` reads.

- `group_min_misses` / `min_bytes`: the store's serving model — a group's missing pages are read
  together (each once), then any `capacity` pages of those resident and those just read may be kept.
  Keeping the pages whose next use comes soonest is optimal (farthest-in-future, Belady 1966; checked
  against an exhaustive search in tests/python/pyg/test_hetero.py), so this is a true lower bound on the
  bytes of any policy with that capacity. With `lookahead` L the same rule sees only the next L groups
  (what a window buffer knows): pages no visible group needs are kept only while room is left.
- `min_misses`: the classic page-by-page MIN with bypass over the flattened sequence (a group's pages
  one at a time) — slightly more than the group optimum, since it cannot hold a whole group at once.
Misses include the first touch of each page (the cache starts empty, as the stores do).
"""
from __future__ import annotations

import heapq

import numpy as np
import torch


def record_served(store) -> list:
    """Record what a `gpuio.TableCache` serves: appends, per served group (one flush: the batches its
    accumulator merged, read with one request), the requested row ids. That is the trace MIN must see
    — pages a group reads once serve every batch of the group, cached or not (TableCache.observe_served)."""
    trace: list = []
    store.observe_served(lambda rows: trace.append(rows.cpu()))
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


def group_min_misses(trace, capacity: int, lookahead: int | None = None, page_rows: int = 1) -> int:
    """Misses of the optimal cache of `capacity` pages under the group serving model (module doc);
    with `lookahead`, of the farthest-in-future rule seeing only the next `lookahead` groups."""
    lookahead = len(trace) if lookahead is None else lookahead
    if capacity < 0 or lookahead < 0:
        raise ValueError(f"capacity and lookahead must be >= 0, got {capacity}, {lookahead}")
    groups = [np.unique(torch.as_tensor(t).cpu().numpy().astype(np.int64) // page_rows) for t in trace]
    sizes = np.array([g.size for g in groups], dtype=np.int64)
    seq = np.concatenate(groups) if groups else np.empty(0, np.int64)
    gid = np.repeat(np.arange(len(groups)), sizes)
    nu = next_use(seq)
    nxt_all = np.where(nu < seq.size, gid[np.minimum(nu, max(seq.size - 1, 0))], np.inf)
    next_group = np.split(nxt_all.astype(np.float64), np.cumsum(sizes)[:-1]) if groups else []
    top = int(seq.max()) + 1 if seq.size else 0
    in_cache = np.zeros(top, bool)  # dense membership: O(1) per page, no sorting per group
    in_group = np.zeros(top, bool)
    far = float(len(groups) + lookahead + 2)  # stands for "no known use" in the integer-valued key
    cache = np.empty(0, np.int64)
    cache_next = np.empty(0, np.float64)
    misses = 0
    for i, pages in enumerate(groups):
        hit = in_cache[pages]
        misses += int(pages.size - hit.sum())
        in_group[pages] = True
        keep = ~in_group[cache]
        in_group[pages] = False
        cand = np.concatenate([cache[keep], pages])
        nxt = np.concatenate([cache_next[keep], next_group[i]])
        if cand.size > capacity:
            known = np.where(nxt <= i + lookahead, nxt, far)  # beyond the look-ahead: unknown
            resident = np.concatenate([np.ones(int(keep.sum()), bool), hit])
            key = known * 2 + ~resident  # soonest known use first; then residents before new pages
            sel = np.argpartition(key, capacity - 1)[:capacity] if capacity else np.empty(0, np.int64)
            cand, nxt = cand[sel], nxt[sel]
        in_cache[cache] = False
        in_cache[cand] = True
        cache, cache_next = cand, nxt
    return misses


def min_bytes(trace, capacity_pages: int, page_rows: int, page_bytes: int) -> int:
    """Bytes the optimal cache of `capacity_pages` reads from storage for `trace` (group model)."""
    return group_min_misses(trace, capacity_pages, None, page_rows) * page_bytes


def store_vs_min(store, trace, lookahead: int | None = None) -> dict:
    """A `gpuio.TableCache`'s storage bytes against MIN on the same trace, two ways.

    gpuio's bytes are the blocks its table actually read (host buffer fill + page reads; the table's
    counters, else the store's page bytes + host rows).
    - Per tier (`ratio`, the judged one): the host buffer is a constant tier, so MIN keeps the same
      host rows and the same fill; the rows it serves leave the trace, and MIN runs on the rest with
      the device cache's slots. ratio = gpuio bytes / (same fill + MIN's page reads);
      `device_tier_ratio` compares the page reads alone.
    - Whole capacity (`ratio_whole`): MIN may use the host buffer's room as cache too, one page per
      host row (the store's exact capacity when a row fills a page, as 1024-dim float32 rows do; more
      than it when rows are smaller): a lower bound on any policy with the same total capacity.
    With `lookahead`, also the bytes of the keep-the-soonest rule limited to that many groups (what a
    window-aware admission could reach), per tier."""
    s = store.stats()
    host_rows = s["host_rows"]
    storage = s.get("storage", {})
    got = storage["bytes_read"] if "bytes_read" in storage else s["bytes_from_device"] + host_rows * store.row_bytes
    pages_read = s["pages_miss"] * store.page_bytes
    fill = max(int(got) - pages_read, 0)
    host = store.host
    cold = trace if host is None else [t[host.lookup(torch.as_tensor(t).to(host.row_slot.device)).cpu() < 0]
                                       for t in trace]
    opt_dev = min_bytes(cold, s["cache_slots"], store.page_rows, store.page_bytes)
    whole = min_bytes(trace, s["cache_slots"] + host_rows, store.page_rows, store.page_bytes)
    div = (lambda a, b: a / b if b else (1.0 if a == 0 else float("inf")))
    out = dict(gpuio_bytes=int(got), host_fill_bytes=fill, device_bytes=pages_read, min_bytes=fill + opt_dev,
               min_device_bytes=opt_dev, ratio=div(got, fill + opt_dev), device_tier_ratio=div(pages_read, opt_dev),
               min_whole_bytes=whole, ratio_whole=div(got, whole), capacity_pages=s["cache_slots"] + host_rows)
    if lookahead is not None:
        w = group_min_misses(cold, s["cache_slots"], lookahead, store.page_rows) * store.page_bytes
        out.update(lookahead=lookahead, window_min_bytes=fill + w, window_min_ratio=div(fill + w, fill + opt_dev))
    return out

__all__ = ["record_served", "page_sequence", "next_use", "min_misses", "group_min_misses", "min_bytes", "store_vs_min"]
