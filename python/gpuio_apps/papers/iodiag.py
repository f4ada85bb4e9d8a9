"""What the applications' I/O did in one timed pass, in one line per store (so a GPU run names its bound).

    io = IoCounters()                     # every store has one: store.io
    io.submitted("read", nbytes, handle, "host")
    snap = PassProbe(store)               # before a pass ...
    print(snap.line("gemm-bf16 pipeline"))  # ... after it: calls, bytes per call, calls in flight, engine
                                          # requests and their size, GPU stream chunks, bounce pool, disk bytes

The line separates what the application asked for (calls of a size, how many in flight when the next was
submitted) from what reached the device (engine requests and their mean size; the disk's own sector
counters, so page-cache hits of the pread baseline show as logical bytes read that the disk never served).
`PendingWrites` is the store's record of CUDA writes not yet known complete (gpuio_apps.papers.store.Store uses it
to keep a read that overlaps one stream-ordered behind it).
"""
from __future__ import annotations

import collections
import os
from typing import Any

MiB = 1 << 20
# engine.stats() keys the diagnostic reads (the GPU layer's appear once a CUDA request attached it)
ENGINE_COUNTERS = ("ops", "bytes", "batches", "bytes_direct", "bytes_staged", "workers", "gpu_stream_requests",
                   "gpu_stream_chunks", "gpu_stream_host_submits", "gpu_bounce_waits", "gpu_bounce_bytes")
PENDING_PRUNE_AT = 64  # PendingWrites drops completed entries once it holds this many
OPS = ("read", "write")


class IoCounters:
    """Per op: calls, bytes, where a CUDA call's block ids lived (host/device; "-" for host memory), and how
    many calls of that op were in flight when each was submitted (itself included). In flight is counted
    by pruning finished calls from the front (calls finish about in submission order): an upper bound that
    costs one done() per submit, not one per call in flight."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.calls = {op: 0 for op in OPS}
        self.bytes = {op: 0 for op in OPS}
        self.ids = {op: collections.Counter() for op in OPS}
        self.depth_sum = {op: 0 for op in OPS}
        self.depth_max = {op: 0 for op in OPS}
        self._inflight = {op: collections.deque() for op in OPS}

    def submitted(self, op: str, nbytes: int, handle: Any, ids_where: str) -> None:
        if op not in OPS:
            raise ValueError(f"op={op!r} is not one of {', '.join(OPS)}")
        q = self._inflight[op]
        while q and q[0].done():
            q.popleft()
        if not handle.done():
            q.append(handle)
        depth = len(q) + (0 if q and q[-1] is handle else 1)
        self.calls[op] += 1
        self.bytes[op] += int(nbytes)
        self.ids[op][ids_where] += 1
        self.depth_sum[op] += depth
        self.depth_max[op] = max(self.depth_max[op], depth)

    def summary(self, op: str) -> str:
        n = self.calls[op]
        if not n:
            return f"{op}s none"
        ids = ", ".join(f"{k} {v}" for k, v in sorted(self.ids[op].items()) if k != "-")
        return (f"{op}s {n} x {self.bytes[op] / n / MiB:.2f} MiB" + (f" (ids: {ids})" if ids else "")
                + f", in flight at submit mean {self.depth_sum[op] / n:.1f} max {self.depth_max[op]}")


class PendingWrites:
    """[first, end) block ranges of writes not yet known complete, with their handles."""

    def __init__(self):
        self._items: list[tuple[int, int, Any]] = []

    def add(self, first: int, end: int, handle: Any) -> None:
        if end <= first:
            raise ValueError(f"empty block range [{first}, {end})")
        if len(self._items) >= PENDING_PRUNE_AT:
            self._items = [it for it in self._items if not it[2].done()]
        self._items.append((first, end, handle))

    def overlaps(self, first: int, end: int) -> bool:
        """Whether a write still in flight touches blocks [first, end); finished overlapping ones are dropped."""
        hit, keep = False, []
        for a, b, h in self._items:
            if a < end and first < b:
                if h.done():
                    continue
                hit = True
            keep.append((a, b, h))
        self._items = keep
        return hit

    def __len__(self) -> int:
        return len(self._items)


def disk_sectors(path: str) -> tuple[int, int] | None:
    """(sectors read, sectors written) of the block device holding `path` (512-byte units, /sys/dev/block),
    or None where there is none to read (tmpfs, overlay without a device, a volume)."""
    if path.startswith("rbd:"):
        return None
    try:
        st = os.stat(path)
        with open(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/stat") as f:
            fields = f.read().split()
        return int(fields[2]), int(fields[6])
    except (OSError, IndexError, ValueError):
        return None


class PassProbe:
    """Counters of one store at the start of a pass; line() says what the pass did."""

    def __init__(self, store):
        self.store = store
        store.io.reset()
        self.engine = store.engine_counters() if hasattr(store, "engine_counters") else {}
        self.disk = disk_sectors(store.paths[0])

    def line(self, label: str) -> str:
        st = self.store
        parts = [f"io-diag {label} [{st.kind}]:", st.io.summary("read") + ";", st.io.summary("write") + ";"]
        if self.engine:
            now = st.engine_counters()
            d = {k: now.get(k, 0) - self.engine.get(k, 0) for k in now if isinstance(now.get(k), (int, float))}
            ops = d.get("ops", 0)
            if ops:
                staged = d.get("bytes_staged", 0) / max(1, d.get("bytes", 0))
                parts.append(f"engine requests {ops} x {d.get('bytes', 0) / ops / MiB:.2f} MiB "
                             f"({staged:.0%} staged, staging slot {now['staging_slot_bytes'] / MiB:.2f} MiB), "
                             f"{now.get('workers', '?')} worker(s);")
            chunks = d.get("gpu_stream_chunks", 0)
            if chunks:
                moved = st.io.bytes["read"] + st.io.bytes["write"]
                parts.append(f"GPU stream chunks {chunks} x {moved / chunks / MiB:.2f} MiB through a bounce pool of "
                             f"{now.get('gpu_bounce_bytes', 0) / MiB:.0f} MiB, {d.get('gpu_stream_host_submits', 0)} "
                             f"submitted at once (host ids: up to the pool's slots in flight), the rest one at a "
                             f"time per stream; bounce waits {d.get('gpu_bounce_waits', 0)};")
        now_disk = disk_sectors(st.paths[0])
        if self.disk and now_disk:
            rd, wr = ((b - a) * 512 for a, b in zip(self.disk, now_disk))
            logical = st.io.bytes["read"]
            parts.append(f"disk read {rd / MiB:.0f} MiB for {logical / MiB:.0f} MiB asked"
                         + (f" ({rd / logical:.2f})" if logical else "") + f", written {wr / MiB:.0f} MiB")
        return " ".join(parts)
