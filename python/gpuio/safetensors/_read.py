"""Reading tensors' bytes into CUDA or host memory: page-cache aware, overlapped across tensors and files.

Destinations. Every tensor gets its own allocation (torch.empty on CUDA: the caching allocator starts each at
512 bytes or more; on the CPU a NumPy array over-allocated by DEST_ALIGN bytes and used from a DEST_ALIGN
boundary, which torch.from_numpy wraps as the tensor's storage of exactly its bytes): it starts on a 256-byte
boundary whatever its file offset, and deleting it frees its bytes. Files written by `safetensors` carry no
padding (a real checkpoint had 255 of 255 parameters off a 256-byte boundary, and cuBLAS picked other kernels
for them), so the file's bytes cannot land in place: they go through staging (page-locked slots and rings on
CUDA, a reader's host slot on the CPU) and are copied to each tensor's destination at its own shift; on the CPU
resident bytes are copied from the page cache straight into the destination. zero_copy=True keeps the old layout
(one destination buffer per file, each run of adjacent tensors at an address congruent to its file offset modulo
4 KiB, so on the CPU O_DIRECT reads land in place and no copy is made; the tensors are views of that buffer,
aligned only as in the file, and the buffer lives while any of them does).

Plan. The chosen tensors of each file are merged into runs of adjacent bytes; runs are cut into chunks of
gpuio.defaults' safetensors.chunk_mib on 4 KiB boundaries, each chunk knowing the destinations it overlaps
(targets: file range and the uint8 tensor it lands in); safetensors.threads of them are read at once, of which
O_DIRECT reads of at most safetensors.direct_mib.

Residency. Before any read, each chunk's bytes are looked up in the page cache (`_core.page_cache_residency`:
cachestat(2), or mincore(2) on older kernels): a chunk wholly resident is copied out of the page cache
(preadv with RWF_NOWAIT, so a page evicted since the probe is never waited for: what did not come is read
by O_DIRECT instead); any other chunk is read with O_DIRECT in whole blocks through the engine (the file's
partial last block, which O_DIRECT cannot read, by a plain pread). Both kinds run at once.

Overlap. `threads` workers take chunks in file order. On CUDA each has two page-locked slots and a CUDA
stream: it fills one slot (pread, or an engine read it waits for with the GIL released), queues the slot's
copies to the device on its stream (one per destination the chunk overlaps), records an event, and fills its
other slot meanwhile; a slot is refilled only after its event. So up to `threads` reads are with the disk (or
copying from the page cache) while earlier chunks cross PCIe.

C++. safetensors.pipeline=cpp (auto, the default, on every device) hands the owned destinations to the GPU layer's plan reader instead (_plan.py,
gpuio/plan_reader.hpp): the same plan (segments of file offset, length, destination, residency) read and copied in
C++, the ring from the process's one pinned pool.

Slots. A slot comes from gpuio's pool of page-locked slots in 2 MiB pages (gpuio._pinned: registered once per
process, kept for the next read), so an O_DIRECT request lands in a few segments, not one per 4 KiB page; with
safetensors.huge_slots off, or where the pool gives none (CUDA refuses the registration), it is one of torch's
pinned blocks (4 KiB pages, cached by torch), and stats["slots"] says which.
"""
from __future__ import annotations

import bisect
import contextlib
import os
import threading
import time
from typing import Any

import numpy as np
import torch

from .. import _core, _pinned, defaults as _defaults
from ._format import TensorInfo
from ._plan import load_plan

ALIGN = 4096
DEST_ALIGN = 256  # every returned tensor starts on such a boundary (CUDA's caching allocator gives 512)



def _down(x: int) -> int:
    return x // ALIGN * ALIGN


def _up(x: int) -> int:
    return -(-x // ALIGN) * ALIGN


class _Chunk:
    __slots__ = ("file", "lo", "hi", "base", "dst", "cached", "targets")

    def __init__(self, file: int, lo: int, hi: int, base: int, dst: int):
        self.file, self.lo, self.hi, self.base, self.dst = file, lo, hi, base, dst  # base: aligned start <= lo
        self.cached = False
        self.targets: list[tuple[int, int, torch.Tensor]] = []  # (file lo, file hi, uint8 dst of hi - lo bytes)


def plan(by_file: dict[int, list[TensorInfo]], chunk_bytes: int):
    """(per file: the zero-copy buffer's bytes, {tensor name: position in it} and its runs [(file begin, file
    end, position)]; the chunks in file order)."""
    layouts: dict[int, tuple[int, dict[str, int], list[tuple[int, int, int]]]] = {}
    chunks: list[_Chunk] = []
    for f, infos in sorted(by_file.items()):
        runs: list[list[Any]] = []  # [begin, end, [infos]]
        for t in sorted(infos, key=lambda t: (t.begin, t.end)):
            if runs and t.begin <= _up(runs[-1][1]):  # adjacent, or a gap within one block: read through it
                runs[-1][1] = max(runs[-1][1], t.end)
                runs[-1][2].append(t)
            else:
                runs.append([t.begin, t.end, [t]])
        cursor, where, placed = 0, {}, []
        for begin, end, ts in runs:
            pos = _up(cursor) + begin % ALIGN
            placed.append((begin, end, pos))
            for t in ts:
                where[t.name] = pos + t.begin - begin
            for a in range(_down(begin), end, chunk_bytes):
                lo, hi = max(a, begin), min(a + chunk_bytes, end)
                if hi > lo:
                    chunks.append(_Chunk(f, lo, hi, a, pos + lo - begin))
            cursor = pos + end - begin
        layouts[f] = (_up(cursor), where, placed)
    return layouts, chunks


def attach(chunks: list[_Chunk], spans: dict[int, list[tuple[int, int, torch.Tensor]]]) -> None:
    """Set each chunk's targets: the destinations (file lo, file hi, uint8 tensor) of spans[its file] that
    overlap it, in file order (a file's spans never overlap: its tensors do not)."""
    starts = {}
    for f, sp in spans.items():
        sp.sort(key=lambda x: x[0])
        starts[f] = [x[0] for x in sp]
    for c in chunks:
        sp = spans.get(c.file, [])
        i = max(0, bisect.bisect_right(starts.get(c.file, []), c.lo) - 1)
        out = []
        while i < len(sp) and sp[i][0] < c.hi:
            if sp[i][1] > c.lo:
                out.append(sp[i])
            i += 1
        c.targets = out


def scatter(targets: list[tuple[int, int, torch.Tensor]], src: torch.Tensor, src_lo: int, lo: int, hi: int,
            non_blocking: bool = False) -> None:
    """Copy file bytes [lo, hi), held in src (a uint8 tensor whose byte 0 is file byte src_lo), to each target
    they overlap, at the target's own shift (one copy per target; on CUDA queued on the current stream)."""
    for tlo, thi, dst in targets:
        a, b = max(lo, tlo), min(hi, thi)
        if b > a:
            dst[a - tlo:b - tlo].copy_(src[a - src_lo:b - src_lo], non_blocking=non_blocking)


def owned_empty(nbytes: int, device: torch.device) -> torch.Tensor:
    """A uint8 tensor of nbytes that owns its storage (of exactly nbytes, freed with the tensor) and starts on a
    DEST_ALIGN boundary: torch.empty on CUDA; on the CPU a NumPy array used from an aligned byte (torch's CPU
    allocator aligns to 64 only)."""
    if device.type == "cuda":
        t = torch.empty(nbytes, dtype=torch.uint8, device=device)
        if t.data_ptr() % DEST_ALIGN == 0:
            return t
        raise RuntimeError(f"torch gave {device} memory at {t.data_ptr():#x}, not {DEST_ALIGN}-byte aligned "
                           "(a custom CUDA allocator?)")
    from ..engine import aligned_empty

    return torch.from_numpy(aligned_empty(nbytes, DEST_ALIGN))


def owned(t: torch.Tensor) -> torch.Tensor:
    """t itself where it is contiguous, starts on a DEST_ALIGN boundary and is all of its storage; else a copy
    into memory of its own that is (what get_slice returns: a slice of a tensor is a view)."""
    if (t.is_contiguous() and t.data_ptr() % DEST_ALIGN == 0 and t.storage_offset() == 0
            and t.untyped_storage().nbytes() == t.numel() * t.element_size()):
        return t
    out = owned_empty(t.numel() * t.element_size(), t.device)
    if t.numel():
        out.copy_(t.contiguous().reshape(-1).view(torch.uint8))
    return out.view(t.dtype).reshape(t.shape)


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


def read_tensors(ckpt, by_file: dict[int, list[TensorInfo]], device: torch.device, threads: int | None = None,
                 chunk_bytes: int | None = None, zero_copy: bool = False) -> tuple[dict[str, torch.Tensor], dict]:
    """Read the tensors of by_file onto device: ({name: tensor}, stats). Each tensor owns its memory and starts
    on a DEST_ALIGN boundary; zero_copy=True: views of one buffer per file instead (see the module's doc).
    threads and chunk_bytes: None: gpuio.defaults' safetensors.threads and safetensors.chunk_mib."""
    if zero_copy:
        bufs, stats = read_into_buffers(ckpt, by_file, device, threads, chunk_bytes)
        return views(bufs, by_file, device), stats
    dests: dict[str, torch.Tensor] = {}
    spans: dict[int, list[tuple[int, int, torch.Tensor]]] = {}
    for f, infos in by_file.items():
        for t in infos:
            dests[t.name] = d = owned_empty(t.nbytes, device)
            if t.nbytes:
                spans.setdefault(f, []).append((t.begin, t.end, d))
    pipeline = _defaults.get("safetensors.pipeline")
    if pipeline in ("cpp", "auto"):
        stats = load_plan(ckpt, spans, device, threads, chunk_bytes)
        stats["data_path"] = data_path_line(stats, stats.pop("io_paths"), device)
    else:
        _, stats = _load(ckpt, by_file, device, threads, chunk_bytes, spans)
    out = {t.name: dests[t.name].view(t.torch_dtype).reshape(t.torch_shape) for ts in by_file.values() for t in ts}
    return out, stats


def read_into_buffers(ckpt, by_file: dict[int, list[TensorInfo]], device: torch.device, threads: int | None = None,
                      chunk_bytes: int | None = None) -> tuple[dict[int, tuple[torch.Tensor, dict[str, int]]], dict]:
    """zero_copy: read the tensors of by_file onto device: ({file: (its buffer, {name: position})}, stats)."""
    return _load(ckpt, by_file, device, threads, chunk_bytes, None)


def _load(ckpt, by_file: dict[int, list[TensorInfo]], device: torch.device, threads: int | None,
          chunk_bytes: int | None, spans: dict | None):
    """The reads: into spans (owned destinations) where given, else into one zero-copy buffer per file."""
    t0 = time.perf_counter()
    threads = threads or int(_defaults.get("safetensors.threads"))
    chunk_bytes = chunk_bytes or int(_defaults.get("safetensors.chunk_mib")) << 20
    layouts, chunks = plan(by_file, chunk_bytes)
    method = mark_resident(ckpt, chunks) if chunks else "none"
    cuda = device.type == "cuda"
    zero_copy = spans is None
    bufs: dict[int, tuple[torch.Tensor, dict[str, int]]] = {}
    if zero_copy:
        spans = {}
        for f, (n, where, placed) in layouts.items():
            buf = torch.empty(n, dtype=torch.uint8, device=device) if cuda else _host_buffer(n)
            bufs[f] = (buf, where)
            spans[f] = [(b, e, buf[pos:pos + e - b]) for b, e, pos in placed]
    attach(chunks, spans)
    ready = None
    if cuda:  # the readers' streams start after the destinations' allocation (ordered on the caller's stream)
        ready = torch.cuda.Event()
        ready.record(torch.cuda.current_stream(device))
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
        if not zero_copy:
            return work_host_owned()
        while (c := take()) is not None:
            dst = bufs[c.file][0]
            start = c.dst - (c.lo - c.base)  # the destination of byte c.base: 4 KiB aligned by the plan
            filler.fill(c, dst[start:start + _up(c.hi) - c.base].numpy())
            filled()

    def work_host_owned() -> None:
        """Resident chunks straight from the page cache into each destination; the rest by O_DIRECT into this
        reader's staging (whole blocks), then copied to each destination at its shift."""
        staging: torch.Tensor | None = None
        while (c := take()) is not None:
            rest = c
            if c.cached:
                at = copy_cached_into_targets(c)
                rest = None
                if at < c.hi:  # evicted since the probe: the rest by O_DIRECT
                    rest = _Chunk(c.file, at, c.hi, _down(at), 0)
                    rest.targets = c.targets
            if rest is not None:
                if staging is None:
                    staging = _host_buffer(chunk_bytes)
                filler.fill(rest, staging[:_up(rest.hi) - rest.base].numpy())
                scatter(rest.targets, staging, rest.base, rest.lo, rest.hi)
            filled()

    def copy_cached_into_targets(c: _Chunk) -> int:
        """Copies chunk c's destinations' bytes from the page cache; returns where it stopped (c.hi: all came)."""
        fd, path = ckpt.fds[c.file], ckpt.paths[c.file]
        for tlo, thi, dst in c.targets:
            a, b = max(c.lo, tlo), min(c.hi, thi)
            got = filler._copy_cached(fd, memoryview(dst.numpy())[a - tlo:b - tlo], a, path)
            if got < b - a:
                counters.add(pagecache=a + got - c.lo)
                return a + got
        counters.add(pagecache=c.hi - c.lo)
        return c.hi

    def work_cuda() -> None:
        with torch.cuda.device(device):
            cuda_worker()

    slot_kinds: set[str] = set()

    def cuda_worker() -> None:
        stream = torch.cuda.Stream(device)
        stream.wait_event(ready)
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
                    scatter(c.targets, slot, c.base, c.lo, c.hi, non_blocking=True)
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
        flight: list[tuple[int, int, int, Any]] = []

        def land(k: int, lo: int, hi: int, fut) -> None:
            if fut is not None:
                fut.wait()
            a, b = max(lo, c.lo), min(hi, c.hi)
            with torch.cuda.stream(stream):
                scatter(c.targets, slot[k * piece_bytes:(k + 1) * piece_bytes], lo, a, b, non_blocking=True)
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
             "residency": method, "seconds": seconds, "device": str(device), "zero_copy": zero_copy,
             "pipeline": "python", "copy_streams": int(_defaults.get("safetensors.copy_streams")),
             "chunk_targets": sum(len(c.targets) for c in chunks),  # (chunk, destination) pairs: copies made
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
