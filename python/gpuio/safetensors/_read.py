"""Reading tensors' bytes into CUDA or host memory: page-cache aware, overlapped across tensors and files.

Plan. The chosen tensors of each file are merged into runs of adjacent bytes; each run gets a place in one
destination buffer per file (on the device) whose address is congruent to the run's file offset modulo 4 KiB,
so a tensor's view is aligned as in the file and an O_DIRECT read of whole blocks can land in place. Runs are
cut into chunks of gpuio.defaults' safetensors.chunk_mib on 4 KiB boundaries; safetensors.threads of them are read
at once, of which O_DIRECT reads of at most safetensors.direct_mib.

Residency. Before any read, each chunk's bytes are looked up in the page cache (`_core.page_cache_residency`:
cachestat(2), or mincore(2) on older kernels): a chunk wholly resident is copied out of the page cache
(preadv with RWF_NOWAIT, so a page evicted since the probe is never waited for: what did not come is read
by O_DIRECT instead); any other chunk is read with O_DIRECT in whole blocks through the engine (the file's
partial last block, which O_DIRECT cannot read, by a plain pread). Both kinds run at once.

Overlap. `threads` workers take chunks in file order. On CUDA each has two page-locked slots and a CUDA
stream: it fills one slot (pread, or an engine read it waits for with the GIL released), queues the slot's
copy to the device on its stream, records an event, and fills its other slot meanwhile; a slot is refilled
only after its event. So up to `threads` reads are with the disk (or copying from the page cache) while
earlier chunks cross PCIe. On the CPU the workers read straight into the destination (no staging).

Slots. A slot comes from gpuio's pool of page-locked slots in 2 MiB pages (gpuio._pinned: registered once per
process, kept for the next read), so an O_DIRECT request lands in a few segments, not one per 4 KiB page; with
safetensors.huge_slots off, or where the pool gives none (CUDA refuses the registration), it is one of torch's
pinned blocks (4 KiB pages, cached by torch), and stats["slots"] says which.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

import numpy as np
import torch

from .. import _core, _pinned, defaults as _defaults
from ._format import TensorInfo

ALIGN = 4096




def _down(x: int) -> int:
    return x // ALIGN * ALIGN


def _up(x: int) -> int:
    return -(-x // ALIGN) * ALIGN


class _Chunk:
    __slots__ = ("file", "lo", "hi", "base", "dst", "cached")

    def __init__(self, file: int, lo: int, hi: int, base: int, dst: int):
        self.file, self.lo, self.hi, self.base, self.dst = file, lo, hi, base, dst  # base: aligned start <= lo
        self.cached = False


def plan(by_file: dict[int, list[TensorInfo]], chunk_bytes: int):
    """(per file: total destination bytes and {tensor name: destination position}; the chunks in file order)."""
    layouts: dict[int, tuple[int, dict[str, int]]] = {}
    chunks: list[_Chunk] = []
    for f, infos in sorted(by_file.items()):
        runs: list[list[Any]] = []  # [begin, end, [infos]]
        for t in sorted(infos, key=lambda t: (t.begin, t.end)):
            if runs and t.begin <= _up(runs[-1][1]):  # adjacent, or a gap within one block: read through it
                runs[-1][1] = max(runs[-1][1], t.end)
                runs[-1][2].append(t)
            else:
                runs.append([t.begin, t.end, [t]])
        cursor, where = 0, {}
        for begin, end, ts in runs:
            pos = _up(cursor) + begin % ALIGN
            for t in ts:
                where[t.name] = pos + t.begin - begin
            for a in range(_down(begin), end, chunk_bytes):
                lo, hi = max(a, begin), min(a + chunk_bytes, end)
                if hi > lo:
                    chunks.append(_Chunk(f, lo, hi, a, pos + lo - begin))
            cursor = pos + end - begin
        layouts[f] = (_up(cursor), where)
    return layouts, chunks


def direct_span(lo: int, hi: int, file_size: int) -> tuple[int, int]:
    """The whole blocks an O_DIRECT read of file bytes [lo, hi) covers: from the block holding lo to the end of
    hi's block or of the file's last whole block, whichever is first (none where the end is not past the start);
    the bytes from the end on (the file's partial last block) come by pread."""
    return _down(lo), min(_up(hi), _down(file_size))


def pieces(c: _Chunk, file_size: int, piece: int) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
    """How a ring reader reads chunk c: its direct_span cut into O_DIRECT pieces [lo, hi) of at most `piece`
    bytes, and the bytes of c past the span (the file's partial last block, read by pread), or None."""
    start, end = direct_span(c.lo, c.hi, file_size)
    out = [(lo, min(lo + piece, end)) for lo in range(start, end, piece)]
    tail = max(c.lo, end)
    return out, ((tail, c.hi) if tail < c.hi else None)


def mark_resident(ckpt, chunks: list[_Chunk]) -> str:
    """Set chunk.cached where every byte of the chunk is in the page cache; returns the probe's method."""
    method = "none"
    for f in sorted({c.file for c in chunks}):
        mine = [c for c in chunks if c.file == f]
        resident, method = _core.page_cache_residency(ckpt.fds[f], [(c.lo, c.hi - c.lo) for c in mine])
        for c, r in zip(mine, resident):
            c.cached = r >= c.hi - c.lo
    return method


class _Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.pagecache = self.direct = self.buffered = self.disk = 0

    def add(self, pagecache: int = 0, direct: int = 0, buffered: int = 0, disk: int = 0) -> None:
        with self.lock:
            self.pagecache += pagecache
            self.direct += direct
            self.buffered += buffered
            self.disk += disk


def _pread_all(fd: int, view: memoryview, off: int, path: str) -> None:
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], off + got)
        if n == 0:
            raise OSError(5, f"{path}: the file ended at byte {off + got} while reading it (truncated meanwhile?)")
        got += n


class _Filler:
    """Fills buf (a uint8 NumPy view whose byte 0 is file byte chunk.base) with the chunk's bytes."""

    def __init__(self, ckpt, counters: _Counters, direct_chunks: int = 0):
        """direct_chunks: O_DIRECT reads of at most this many chunks at once (0: as many as there are readers)."""
        self.ckpt, self.counters = ckpt, counters
        self.nowait = hasattr(os, "RWF_NOWAIT")
        self.direct_gate = threading.BoundedSemaphore(direct_chunks) if direct_chunks else contextlib.nullcontext()

    def fill(self, c: _Chunk, buf: np.ndarray) -> None:
        fd, path = self.ckpt.fds[c.file], self.ckpt.paths[c.file]
        at = c.lo
        if c.cached:
            view = memoryview(buf)[c.lo - c.base:c.hi - c.base]
            at += self._copy_cached(fd, view, c.lo, path)
            self.counters.add(pagecache=at - c.lo)
            if at == c.hi:
                return
        self._read_direct(c, buf, at, fd, path)

    def _copy_cached(self, fd: int, view: memoryview, off: int, path: str) -> int:
        """Bytes copied from the page cache, from off on, stopping at the first page not there. A RWF_NOWAIT read
        also stops at a cached page that carries a readahead mark (the kernel would start readahead there): when
        the probe says the rest is still all cached, the rest is read without RWF_NOWAIT."""
        if not self.nowait:
            _pread_all(fd, view, off, path)
            return len(view)
        got = 0
        while got < len(view):
            try:
                n = os.preadv(fd, [view[got:]], off + got, os.RWF_NOWAIT)
            except BlockingIOError:
                n = 0
            except OSError as e:
                if e.errno not in (95, 22):  # EOPNOTSUPP/EINVAL: no RWF_NOWAIT on this file system
                    raise
                self.nowait = False
                n = 0
            if n == 0:
                rest = len(view) - got
                if self.nowait and _core.page_cache_residency(fd, [(off + got, rest)])[0][0] < rest:
                    break  # evicted since the probe: the caller reads the rest by O_DIRECT
                _pread_all(fd, view[got:], off + got, path)
                return len(view)
            got += n
        return got

    def _read_direct(self, c: _Chunk, buf: np.ndarray, at: int, fd: int, path: str) -> None:
        """[at, c.hi) by O_DIRECT in whole blocks (from the block holding `at`), the partial last block of the
        file and everything on a file system without O_DIRECT by pread."""
        size = self.ckpt.headers[c.file].size
        io = self.ckpt.io(c.file)
        a, end = direct_span(at, c.hi, size)
        if io is not None and end > a:
            ids = np.arange(a // ALIGN, end // ALIGN, dtype=np.int64)
            with self.direct_gate:
                io.read(ids, buf[a - c.base:end - c.base])
            self.counters.add(direct=min(end, c.hi) - at, disk=end - a)
            at = min(end, c.hi)
        if at < c.hi:
            _pread_all(fd, memoryview(buf)[at - c.base:c.hi - c.base], at, path)
            self.counters.add(buffered=c.hi - at)


def _pinned_block(nbytes: int) -> torch.Tensor:
    """A page-locked uint8 buffer whose address is 4 KiB aligned (torch's pinned blocks are page aligned and
    cached by torch for the next load; nbytes a power of two, so nothing is rounded up)."""
    t = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    if t.data_ptr() % ALIGN == 0:
        return t
    t = torch.empty(nbytes + ALIGN, dtype=torch.uint8, pin_memory=True)
    skip = (-t.data_ptr()) % ALIGN
    return t[skip:skip + nbytes]


def staging_slot(nbytes: int, pooled: bool) -> tuple[torch.Tensor, str]:
    """A page-locked slot of nbytes and its kind: "pool" (gpuio._pinned's 2 MiB pages; hand it back with
    _pinned.give_slot once no copy or write uses it) where pooled and the pool gives one, else "torch" (a pinned
    block of torch's caching allocator)."""
    slot = _pinned.take_slot(nbytes) if pooled else None
    return (slot, "pool") if slot is not None else (_pinned_block(nbytes), "torch")


def _host_buffer(nbytes: int) -> torch.Tensor:
    from ..engine import aligned_empty

    return torch.from_numpy(aligned_empty(max(nbytes, 1)))[:nbytes]


def read_into_buffers(ckpt, by_file: dict[int, list[TensorInfo]], device: torch.device, threads: int | None = None,
                      chunk_bytes: int | None = None) -> tuple[dict[int, tuple[torch.Tensor, dict[str, int]]], dict]:
    """Read the tensors of by_file onto device: ({file: (its buffer, {name: position})}, stats). threads and
    chunk_bytes: None: gpuio.defaults' safetensors.threads and safetensors.chunk_mib."""
    t0 = time.perf_counter()
    threads = threads or int(_defaults.get("safetensors.threads"))
    chunk_bytes = chunk_bytes or int(_defaults.get("safetensors.chunk_mib")) << 20
    layouts, chunks = plan(by_file, chunk_bytes)
    method = mark_resident(ckpt, chunks) if chunks else "none"
    cuda = device.type == "cuda"
    bufs = {f: (torch.empty(n, dtype=torch.uint8, device=device) if cuda else _host_buffer(n), where)
            for f, (n, where) in layouts.items()}
    counters = _Counters()
    direct_mib = int(_defaults.get("safetensors.direct_mib"))
    huge_slots = bool(_defaults.get("safetensors.huge_slots"))
    ring_kib = int(_defaults.get("safetensors.ring_kib"))
    piece_bytes = _up((ring_kib << 10) // 2)  # whole blocks, at least one
    filler = _Filler(ckpt, counters, max(1, (direct_mib << 20) // chunk_bytes) if direct_mib else 0)
    for f in sorted({c.file for c in chunks if not c.cached}):
        ckpt.io(f)  # the O_DIRECT targets start before the readers, while nothing waits on them
    nthreads = max(1, min(threads, len(chunks)))
    todo = iter(chunks)
    lock = threading.Lock()
    errors: list[BaseException] = []

    marks = [0.0, 0.0]  # when the first chunk was taken, when the last fill ended (perf_counter)

    def take() -> _Chunk | None:
        with lock:
            marks[0] = marks[0] or time.perf_counter()
            return None if errors else next(todo, None)

    def filled() -> None:
        t = time.perf_counter()
        with lock:
            marks[1] = max(marks[1], t)

    def work_host() -> None:
        while (c := take()) is not None:
            dst = bufs[c.file][0]
            start = c.dst - (c.lo - c.base)  # the destination of byte c.base: 4 KiB aligned by the plan
            filler.fill(c, dst[start:start + _up(c.hi) - c.base].numpy())
            filled()

    def work_cuda() -> None:
        with torch.cuda.device(device):
            cuda_worker()

    slot_kinds: set[str] = set()

    def cuda_worker() -> None:
        stream = torch.cuda.Stream(device)
        slots: list[torch.Tensor | None] = [None, None]
        pooled: list[torch.Tensor] = []
        done: list[torch.cuda.Event | None] = [None, None]
        ring: list[Any] = [None, [None, None]]  # the ring's slot, its pieces' last copies
        turn = 0
        try:
            while (c := take()) is not None:
                if piece_bytes and not c.cached and ckpt.io(c.file) is not None:
                    if ring[0] is None:
                        ring[0], kind = staging_slot(2 * piece_bytes, huge_slots)
                        slot_kinds.add(kind)
                        if kind == "pool":
                            pooled.append(ring[0])
                    read_by_pieces(c, ring, stream)
                    filled()
                    continue
                s, turn = turn, turn ^ 1
                if done[s] is not None:
                    done[s].synchronize()  # this slot's previous copy has left it
                if slots[s] is None:
                    slots[s], kind = staging_slot(chunk_bytes, huge_slots)
                    slot_kinds.add(kind)
                    if kind == "pool":
                        pooled.append(slots[s])
                slot = slots[s]
                filler.fill(c, slot.numpy())
                filled()
                with torch.cuda.stream(stream):
                    bufs[c.file][0][c.dst:c.dst + c.hi - c.lo].copy_(slot[c.lo - c.base:c.hi - c.base],
                                                                     non_blocking=True)
                    ev = torch.cuda.Event()
                    ev.record(stream)
                done[s] = ev
        finally:
            for ev in done + ring[1]:
                if ev is not None:
                    ev.synchronize()
            slots.clear()
            for slot in pooled:
                _pinned.give_slot(slot)

    def read_by_pieces(c: _Chunk, ring: list, stream) -> None:
        """Chunk c (on disk) through this reader's ring: two pieces in flight, each copied to the device as it
        lands, so the disk's transfers go to a few MiB of memory used over and over (see safetensors.ring_kib)."""
        io, fd, path = ckpt.io(c.file), ckpt.fds[c.file], ckpt.paths[c.file]
        whole, tail = pieces(c, ckpt.headers[c.file].size, piece_bytes)
        slot, events = ring[0], ring[1]
        host = slot.numpy()
        dst = bufs[c.file][0]
        flight: list[tuple[int, int, int, Any]] = []

        def land(k: int, lo: int, hi: int, fut) -> None:
            if fut is not None:
                fut.wait()
            a, b = max(lo, c.lo), min(hi, c.hi)
            with torch.cuda.stream(stream):
                dst[c.dst + a - c.lo:c.dst + b - c.lo].copy_(slot[k * piece_bytes + a - lo:k * piece_bytes + b - lo],
                                                             non_blocking=True)
                events[k] = torch.cuda.Event()
                events[k].record(stream)

        try:
            for i, (lo, hi) in enumerate(whole):
                k = i % 2
                if len(flight) == 2:
                    land(*flight.pop(0))
                if events[k] is not None:
                    events[k].synchronize()  # the piece's previous copy has left it
                ids = np.arange(lo // ALIGN, hi // ALIGN, dtype=np.int64)
                flight.append((k, lo, hi, io.read_async(ids, host[k * piece_bytes:k * piece_bytes + hi - lo])))
            while flight:
                land(*flight.pop(0))
        finally:
            for _, _, _, fut in flight:  # a read failed: none may still write the ring once it goes back
                with contextlib.suppress(Exception):
                    fut.wait()
        direct = (min(whole[-1][1], c.hi) - c.lo) if whole else 0
        if tail is not None:
            k = len(whole) % 2
            if events[k] is not None:
                events[k].synchronize()
            _pread_all(fd, memoryview(host)[k * piece_bytes:k * piece_bytes + tail[1] - tail[0]], tail[0], path)
            land(k, tail[0], tail[1], None)
        counters.add(direct=direct, disk=(whole[-1][1] - whole[0][0]) if whole else 0,
                     buffered=(tail[1] - tail[0]) if tail else 0)

    def run(fn) -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread below
            with lock:
                errors.append(e)

    body = work_cuda if cuda else work_host
    workers = [threading.Thread(target=run, args=(body,), name=f"gpuio-safetensors-{k}", daemon=True)
               for k in range(nthreads - 1)]
    for w in workers:
        w.start()
    run(body)  # the calling thread is one of the workers
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    total = sum(c.hi - c.lo for c in chunks)
    end = time.perf_counter()
    seconds = end - t0
    stats = {"bytes": total, "pagecache_bytes": counters.pagecache, "direct_bytes": counters.direct,
             "buffered_bytes": counters.buffered, "disk_read_bytes": counters.disk, "chunks": len(chunks),
             "threads": nthreads, "threads_max": threads, "chunk_bytes": chunk_bytes, "direct_mib": direct_mib,
             "ring_kib": ring_kib, "piece_bytes": piece_bytes,
             "huge_slots": huge_slots,  # asked for
             "slots": "+".join(sorted(slot_kinds)) or "none",  # had on CUDA: pool (2 MiB pages), torch (blocks)
             "residency": method, "seconds": seconds, "device": str(device),
             # where the time went: planning, residency probe, buffers and engine start before the first read;
             # the reads (the first taken to the last filled); the copies still in flight after the last read
             "setup_s": (marks[0] or end) - t0, "read_s": max(0.0, marks[1] - marks[0]),
             "tail_s": end - (marks[1] or marks[0] or end)}
    stats["data_path"] = data_path_line(stats, ckpt.io_data_paths(), device)
    return bufs, stats


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def data_path_line(stats: dict, io_paths: list[str], device: torch.device) -> str:
    """e.g. 'pagecache 6.1 GiB + uring+direct 2.1 GiB -> pinned -> cuda:0'."""
    parts = []
    if stats["pagecache_bytes"]:
        parts.append(f"pagecache {_size(stats['pagecache_bytes'])}")
    if stats["direct_bytes"]:
        parts.append(f"{'/'.join(io_paths) or 'direct'} {_size(stats['direct_bytes'])}")
    if stats["buffered_bytes"]:
        parts.append(f"pread {_size(stats['buffered_bytes'])}")
    src = " + ".join(parts) or "nothing read"
    return f"{src} -> pinned -> {device}" if device.type == "cuda" else f"{src} -> {device}"


def views(bufs: dict[int, tuple[torch.Tensor, dict[str, int]]], by_file: dict[int, list[TensorInfo]],
          device: torch.device) -> dict[str, torch.Tensor]:
    """Each tensor as a view of its file's buffer (a copy where its address does not suit its dtype: only in
    files whose header length is not a multiple of 8, or a buffer given at an odd address)."""
    out = {}
    for f, infos in by_file.items():
        buf, where = bufs[f]
        for t in infos:
            dtype, shape = t.torch_dtype, t.torch_shape
            if t.nbytes == 0:
                out[t.name] = torch.empty(shape, dtype=dtype, device=device)
                continue
            raw = buf[where[t.name]:where[t.name] + t.nbytes]
            if raw.data_ptr() % dtype.itemsize:
                raw = raw.clone()
            out[t.name] = raw.view(dtype).reshape(shape)
    return out
