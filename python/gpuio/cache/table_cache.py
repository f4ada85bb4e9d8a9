"""`gpuio.TableCache`: row reads served by tiers — constant host buffer, device page cache, storage.

    fs = gpuio.TableCache(tf, gpu_cache_bytes=1 << 30, host_cache_rows=100_000,
                            hot_scores=gpuio.graph.degree_scores(edge_index, tf.shape[0]))
    x = fs.gather(node_ids)          # rows on fs.device
    fs.announce(next_batch_ids)      # window buffering: protect pages the next batches need
    f = fs.submit(ids); x = f.wait() # gpuio.Future; misses of several micro-batches read together

Per served group of batches: rows held by the host buffer come from it; the other rows' pages are
deduplicated and looked up in the page cache; the missing pages of the whole group are read from the
table with one `gather` (one merged engine request); then, as Belady's MIN would with the next uses
the window knows (announced batches), a page read replaces the resident needed furthest in the future
(first those no announced batch needs, by the policy) only if it is needed sooner; the rest are served
once and not cached ("bypass"). Without announcements: every page read replaces a slot by the policy,
never one of this group's hit pages. Thread contract: one thread calls in (the loader's worker).

Other processes: a TableCache pickles as its table (a TensorFile reopens in the receiver), its host buffer (the
rows and their contents: no re-read) and its configuration. The page cache, the window's announcements, the
accumulator's tickets, observers and counters are the sender's: the receiver starts them empty, its page cache
rebuilt empty on the same device (a store on CUDA refuses to arrive, in one line, where there is no CUDA). In a
forked child a store on the host just works (the TensorFile reopens itself); one on CUDA refuses every call at once
with gpuio.gpu.BAD_FORK's line (CUDA does not survive a fork): send it to spawned workers, or keep the GPU side in
the main process.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from gpuio.cache.accumulator import Accumulator
from gpuio.gpu import refuse_bad_fork
from gpuio.cache.host_buffer import HostBuffer, pick_hot_rows
from gpuio.cache.page_cache import PageCache
from gpuio.rows import PagedRows, Rows, SupportsStats, check_row_ids, require
from gpuio.cache.window import WindowBuffer
from gpuio.defaults import defaults_of
from gpuio.future import Future

_KEYWORDS = defaults_of("cache")  # TableCache's keywords: gpuio.defaults' cache rows


def _put(dst: torch.Tensor, pos, src: torch.Tensor, idx=None) -> None:
    """dst[pos] = src[idx] on flat [rows, elems] views; pos None: every row of dst, written in place.
    idx None: src already holds the rows in order."""
    if pos is None:
        if idx is None:
            dst.copy_(src)
        else:
            torch.index_select(src, 0, idx, out=dst)
    else:
        dst.index_copy_(0, pos, src if idx is None else src.index_select(0, idx))


class _Request:
    """Rows submitted and not yet served: the work of the gpuio.Future that submit returns. Served by the
    store's flush, which the first wait() calls if the accumulator still holds it; an error of that flush is
    every one of its requests' error."""
    __slots__ = ("store", "rows", "result", "error")

    def __init__(self, store: "TableCache", rows: torch.Tensor):
        self.store, self.rows, self.result, self.error = store, rows, None, None

    def poll(self) -> bool:
        return self.result is not None or self.error is not None

    def block(self, timeout: float | None) -> None:
        # The serving runs in the waiting thread (its reads bounded by the engine's io_timeout_ms); timeout
        # has nothing left to bound once it has begun.
        if not self.poll():
            self.store.flush()
        if self.error is not None:
            raise self.error

    def take(self) -> torch.Tensor:
        if self.result is None:  # only when the one-thread contract is broken: never a silent None
            raise RuntimeError("a TableCache request was taken by a flush that did not serve it (the store is "
                               "not thread-safe: one thread calls in)")
        return self.result


class TableCache:
    """BaM/GIDS tiered row cache over a row table (see the module docstring).

    Thread safety: not thread-safe. One thread calls in (a data loader's worker); the caches' eviction
    state and the accumulator are unguarded. Several threads need a TableCache each, or a lock around
    calls. The table underneath (a TensorFile) may meanwhile be scattered to from other threads: a row
    cached before such a scatter stays stale until evicted (the cache is read-through, not coherent)."""

    def __init__(self, tf, gpu_cache_bytes: int = _KEYWORDS["gpu_cache_bytes"],
                 host_cache_rows: int = _KEYWORDS["host_cache_rows"], hot_scores=None,
                 window: int = _KEYWORDS["window"], accumulate: bool = _KEYWORDS["accumulate"], *,
                 policy: str = _KEYWORDS["policy"], device=None,
                 inflight_pages_min: int = _KEYWORDS["inflight_pages_min"],
                 host_buffer: HostBuffer | None = None):
        """tf: a `gpuio.TensorFile` (or any gpuio.rows.Rows; TypeError naming what another object lacks).
        gpu_cache_bytes: page-cache budget on `device` (default 256 MiB); 0 disables the cache.
        host_cache_rows: rows in the constant host buffer (default 0), the highest of `hot_scores` (one
        score per row; gpuio.graph.degree_scores or pagerank_scores of the graph). window: announced batches
        whose uses the cache's eviction and admission know (default 8; see gpuio.cache.window).
        accumulate: merge misses of micro-batches until `inflight_pages_min` (default 256) pages are
        missing. device: where the cache lives and rows are delivered (default: CUDA if
        available, else CPU). host_buffer: an existing HostBuffer of this table to share instead of filling
        one (stores of successive runs over one table: the constant tier is read once; host_cache_rows and
        hot_scores are then ignored, and this store's table counts no fill)."""
        require(tf, Rows, "TableCache's table", ": wrap rows already in memory as gpuio.rows.InMemoryRows(tensor)"
                if isinstance(tf, torch.Tensor) else "")
        if gpu_cache_bytes < 0:
            raise ValueError(f"gpu_cache_bytes must be >= 0, got {gpu_cache_bytes}")
        if len(tf.shape) < 1:
            raise ValueError(f"the table needs at least one dimension, got shape {tf.shape}")
        self.tf = tf
        self.device = torch.device(device if device is not None else
                                   ("cuda" if torch.cuda.is_available() else "cpu"))
        self._check_process()
        self._config = dict(gpu_cache_bytes=gpu_cache_bytes, window=window, accumulate=accumulate, policy=policy,
                            inflight_pages_min=inflight_pages_min)
        self.num_rows = int(tf.shape[0])
        self.row_shape = tuple(tf.shape[1:])
        self.dtype = tf.torch_dtype
        itemsize = torch.empty(0, dtype=self.dtype).element_size()
        self.row_elems = math.prod(self.row_shape)
        self.row_bytes = max(1, self.row_elems * itemsize)
        # A page is as many whole rows as fit in one storage block (at least one row): a miss then costs
        # about one block read, the unit the device is fast at.
        self.page_rows = max(1, tf.block_size // self.row_bytes)  # every gpuio.rows.Rows has block_size
        self.page_bytes = self.page_rows * self.row_bytes
        self.num_pages = -(-self.num_rows // self.page_rows)
        slots = min(gpu_cache_bytes // self.page_bytes, self.num_pages)
        self.cache = PageCache(self.num_pages, slots, self.page_rows, self.row_shape, self.dtype,
                               self.device, policy)
        self.host: HostBuffer | None = None
        if host_buffer is not None:
            if host_buffer.row_slot.numel() != self.num_rows:
                raise ValueError(f"host_buffer indexes {host_buffer.row_slot.numel()} rows, the table has "
                                 f"{self.num_rows}")
            self.host = host_buffer
        else:
            hot_rows = pick_hot_rows(self.num_rows, host_cache_rows, hot_scores)
            self.host = HostBuffer(tf, hot_rows, self.num_rows, self.device) if hot_rows.numel() else None
        self.window = WindowBuffer(self.num_pages, window, self.device)
        self.acc = Accumulator(accumulate, inflight_pages_min)
        self._observers: list[Callable[[torch.Tensor], None]] = []
        self._counters = dict(batches=0, flushes=0, rows_requested=0, rows_host=0, rows_gpu_cache=0,
                              rows_device=0, pages_hit=0, pages_miss=0, pages_bypass=0,
                              bytes_from_device=0)

    @property
    def shape(self) -> tuple:
        """(rows, *row_shape) of the table underneath."""
        return (self.num_rows, *self.row_shape)

    def __reduce__(self):
        """Pickled as its table, host buffer and configuration (see the module docstring)."""
        return (_arrive, (self.tf, self.host, str(self.device), self._config))

    def _check_process(self) -> None:
        """BAD_FORK's RuntimeError, at once, for a store on CUDA in a forked child of a process that used CUDA."""
        if self.device.type == "cuda":
            refuse_bad_fork()

    def __repr__(self) -> str:
        return (f"gpuio.TableCache({self.tf!r}, device={self.device}, cache={self.cache.num_slots} pages of "
                f"{self.page_rows} rows ({self.cache.num_slots * self.page_bytes} bytes, {self.cache.policy}), "
                f"host_rows={self.host.num_rows if self.host else 0}, window={self.window.window}, "
                f"accumulate={self.acc.enabled})")

    @property
    def window_batches(self) -> int:
        """Announced batches whose uses eviction and admission know (the `window` option; gpuio.rows.
        SupportsLookahead: how far ahead the loaders announce)."""
        return self.window.window

    # -- public API -----------------------------------------------------------------------------
    def gather(self, idx) -> torch.Tensor:
        """Rows `idx` (any integer tensor; duplicates and empty allowed), on `self.device`."""
        return self.submit(idx, force=True).wait()

    def submit(self, idx, force: bool = False) -> Future:
        """Queue rows idx and return their gpuio.Future; the misses of queued requests are read together once
        inflight_pages_min pages are missing (force=True: serve now), or when a wait() needs them (that wait
        serves the group in its own thread, each read bounded by the engine's io_timeout_ms)."""
        self._check_process()
        rows = check_row_ids(idx, self.num_rows).to(self.device)
        request = _Request(self, rows)
        miss = self._estimate_misses(rows) if self.acc.enabled and not force else 0
        if self.acc.add(request, miss) or force:
            self.flush()
        return Future(request, finish=request.take)

    def prefetch(self, idx) -> Future:
        """Start reading rows idx now, as TensorFile.prefetch does: submit(idx, force=True), which serves the
        queued requests with it in one merged read (in this thread: the future is complete on return)."""
        return self.submit(idx, force=True)

    def announce(self, idx) -> None:
        """Declare rows a coming batch will read; their pages stay cached until that batch is served
        (batches are served in announcement order; the `window` served soonest are protected, later ones
        wait and are protected as earlier ones are served)."""
        self._check_process()
        rows = check_row_ids(idx, self.num_rows).to(self.device)
        if self.host is not None:
            rows = rows[self.host.lookup(rows) < 0]
        self.window.announce(torch.unique(rows // self.page_rows))

    def observe_served(self, fn: Callable[[torch.Tensor], None]) -> None:
        """Call fn(rows) for each group the store serves (one merged read: the batches its accumulator
        merged), in serving order, with the group's requested row ids: the trace a cache study needs."""
        self._observers.append(fn)

    def flush(self) -> None:
        """Serve every queued request now (one merged read of their missing pages)."""
        self._check_process()
        tickets = self.acc.take()
        if tickets:
            try:
                self._serve(tickets)
            except BaseException as e:  # the requests taken are answered, not lost: each one's wait() raises it
                for t in tickets:
                    if t.result is None:
                        t.error = e
                raise

    def stats(self) -> dict:
        """Counters: rows requested and where they came from (host buffer, page cache, device), pages
        hit/missed/bypassed, bytes read, hit rates, evictions, cache geometry."""
        self._check_process()
        c: dict[str, Any] = dict(self._counters)
        req = max(c["rows_requested"], 1)
        pages = max(c["pages_hit"] + c["pages_miss"], 1)
        c.update(host_hit_rate=c["rows_host"] / req, gpu_hit_rate=c["rows_gpu_cache"] / req,
                 device_rate=c["rows_device"] / req, page_hit_rate=c["pages_hit"] / pages,
                 evictions=self.cache.evictions, cache_slots=self.cache.num_slots, page_rows=self.page_rows,
                 host_rows=self.host.num_rows if self.host else 0, policy=self.cache.policy,
                 requests_in_flight=self.acc.pending_miss_pages, batches_pending=len(self.acc.pending),
                 window_batches=len(self.window.pending), window_protected_pages=self.window.protected_pages(),
                 window_waiting=self.window.waiting)
        if isinstance(self.tf, SupportsStats):
            c["storage"] = self.tf.stats()  # the table's own counters: blocks actually read
        return c

    # -- serving ---------------------------------------------------------------------------------
    def _estimate_misses(self, rows: torch.Tensor) -> int:
        if self.host is not None:
            rows = rows[self.host.lookup(rows) < 0]
        pages = torch.unique(rows // self.page_rows)
        return int((self.cache.lookup(pages) < 0).sum())

    def _serve(self, tickets: list) -> None:
        """Copies use flat row indices (index_select / index_copy_: one memcpy per row) rather than
        boolean masks and 2-D advanced indexing, which cost several times more per row on the CPU
        (docs/archive/results/RESULTS_cpu_devbox.md, "Gather rate"); a part that covers the whole batch is written
        in place.
        When every row is a distinct missing one-row page (the cache-missing gather of block-sized rows)
        the pages are read in request order and the read buffer is the result: no copy at all."""
        rows = torch.cat([t.rows for t in tickets]) if len(tickets) > 1 else tickets[0].rows
        for fn in self._observers:
            fn(rows)
        n = rows.numel()
        out = flat = None
        in_host = None
        cold, crow = None, rows  # cold: positions of rows not in the host buffer (None: all of them)
        if self.host is not None:
            host_slot = self.host.lookup(rows)
            in_host = host_slot >= 0
            hpos = in_host.nonzero().flatten()
            if hpos.numel():
                out = torch.empty((n, *self.row_shape), dtype=self.dtype, device=self.device)
                flat = out.view(n, self.row_elems)
                _put(flat, hpos, self.host.read(host_slot[hpos], self.device).reshape(hpos.numel(), -1))
                cold = (~in_host).nonzero().flatten()
                crow = rows[cold]
        pages, inv = torch.unique(crow // self.page_rows, return_inverse=True)
        slots = self.cache.lookup(pages)
        hit = slots >= 0
        slots_hit = slots[hit]
        self.cache.touch(slots_hit)
        n_hit = int(slots_hit.numel())
        in_order = (self.page_rows == 1 and cold is None and n_hit == 0 and pages.numel() == n
                    and (not isinstance(self.tf, PagedRows) or self.tf.reads_in_place(self.device)))
        miss_pages = crow if in_order else pages[~hit]
        fetched = self._read_pages(miss_pages)
        # Rows on hit pages come from the cache, rows on missed pages from `fetched`; all copied out before
        # anything is installed (a hit page may make room for a page needed sooner).
        row_hit = hit[inv]
        if in_order:
            out = fetched.view(n, *self.row_shape)
        elif out is None:
            out = torch.empty((n, *self.row_shape), dtype=self.dtype, device=self.device)
            flat = out.view(n, self.row_elems)
        if crow.numel() and not in_order:
            r_off = crow % self.page_rows
            miss_idx = torch.cumsum(~hit, 0) - 1  # page -> its position among the missed pages
            src_hit = slots * self.page_rows  # flat row index of each page's first row in the cache
            src_miss = miss_idx * self.page_rows
            pos = torch.arange(crow.numel(), device=self.device) if cold is None else cold
            if n_hit == pages.numel():
                _put(flat, cold, self._flat(self.cache.data), src_hit[inv] + r_off)
            elif n_hit == 0:
                _put(flat, cold, self._flat(fetched), src_miss[inv] + r_off)
            else:
                h = row_hit.nonzero().flatten()
                m = (~row_hit).nonzero().flatten()
                _put(flat, pos[h], self._flat(self.cache.data), src_hit[inv[h]] + r_off[h])
                _put(flat, pos[m], self._flat(fetched), src_miss[inv[m]] + r_off[m])
        for t, part in zip(tickets, torch.split(out, [t.rows.numel() for t in tickets])):
            t.result = part
            self.window.release_oldest()
        n_in = self._admit(miss_pages, fetched, slots_hit)
        self._count(tickets, n, int(in_host.sum()) if in_host is not None else 0, int(row_hit.sum()),
                    pages, miss_pages, n_in)

    def _admit(self, pages: torch.Tensor, fetched: torch.Tensor, hit_slots: torch.Tensor) -> int:
        """Install what MIN would keep of the pages just read (PageCache.admit), by the next uses the
        window knows once this group's announcements are released: a page needed sooner than some
        resident's next use replaces the resident needed furthest; the rest are served once, uncached
        (bypass). Without announcements every page read replaces an unused slot by the policy; the group's
        hit pages stay. Returns the pages installed."""
        if pages.numel() == 0 or self.cache.num_slots == 0:
            return 0
        hold = torch.zeros(self.cache.num_slots, dtype=torch.bool, device=self.device)
        hold[hit_slots] = True
        chosen, victims = self.cache.admit(self.window.next_use[pages],
                                           self.window.slot_next_use(self.cache.slot_page), hold)
        if chosen is None:
            self.cache.install(pages, victims, fetched)
        else:
            self.cache.install(pages[chosen], victims, fetched.index_select(0, chosen))
        return int(victims.numel())

    def _read_pages(self, pages: torch.Tensor) -> torch.Tensor:
        """Whole pages from the table in one request (the merged read); past-the-end rows are zeros."""
        if isinstance(self.tf, PagedRows):  # a TensorFile reads page-sized blocks with no per-row cut
            buf = self.tf.gather_pages(pages, self.page_rows, self.device)
        else:
            buf = torch.zeros((pages.numel(), self.page_rows, *self.row_shape), dtype=self.dtype,
                              device=self.device)
            if pages.numel():
                ids = pages[:, None] * self.page_rows + torch.arange(self.page_rows, device=self.device)
                valid = ids < self.num_rows
                buf[valid] = self.tf.gather(ids[valid]).to(self.device)
        last = pages == self.num_pages - 1
        rows_read = pages.numel() * self.page_rows - (int(last.any()) * (self.num_pages * self.page_rows
                                                                          - self.num_rows))
        self._counters["bytes_from_device"] += rows_read * self.row_bytes
        return buf

    def _flat(self, pages: torch.Tensor) -> torch.Tensor:
        """[pages, page_rows, *row] -> [pages * page_rows, row elements] (a view)."""
        return pages.view(pages.shape[0] * self.page_rows, self.row_elems)

    def _count(self, tickets, n_rows, n_host, n_hit, pages, miss_pages, n_installed) -> None:
        c = self._counters
        c["batches"] += len(tickets)
        c["flushes"] += 1
        c["rows_requested"] += n_rows
        c["rows_host"] += n_host
        c["rows_gpu_cache"] += n_hit
        c["rows_device"] += n_rows - n_host - n_hit
        c["pages_hit"] += int(pages.numel() - miss_pages.numel())
        c["pages_miss"] += int(miss_pages.numel())
        c["pages_bypass"] += int(miss_pages.numel() - n_installed)


def _arrive(tf, host, device: str, config: dict) -> TableCache:
    """Unpickle a TableCache: the same table, host buffer and configuration here; an empty page cache."""
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"a gpuio.TableCache with its page cache on {dev} arrived in a process without CUDA: "
                           f"send one made with device='cpu', or use it where CUDA is")
    return TableCache(tf, config["gpu_cache_bytes"], 0, None, config["window"], config["accumulate"],
                        policy=config["policy"], device=dev, inflight_pages_min=config["inflight_pages_min"],
                        host_buffer=host)

__all__ = ["TableCache"]
