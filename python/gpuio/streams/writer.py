"""Writing one stream: fill sblocks in the stream's buffer slots, write them behind with the engine's
async API, chain them, publish on close.

The trailer of sblock i names sblock i+1's start and effective size. Every sblock but the last is full
(the serializer splits records across sblocks), so when sblock i is sealed its successor's run is already
reserved and its effective size is, unless it turns out to be the last one, that run's full size. The writer
therefore writes sblock i at once, claiming a full successor, and keeps ``prefetch_depth`` such writes in
flight while it fills the next slot. At close, if the last sblock is partial, the claim in its
predecessor's trailer is corrected by rewriting that one block (its copy is kept aside, ``bb`` bytes) after
the predecessor's write has completed (alongside the last sblock's write) and before the data sync: the stream is not published yet, so no
reader or restart can see the claim in between.

Disk space for an object is reserved *before* any of its bytes are copied, so a full device fails the
write with ENOSPC and leaves the stream as it was (nothing half-written).

Ordering for durability (close): all sblocks written and completed -> trailer patch written and completed
-> data fsync -> table entry published (shadow page write + fsync). Until then the stream is invisible on
disk and its blocks count as free at the next open.
"""
from __future__ import annotations

import collections
import errno
from typing import Any

import numpy as np

from ..engine import aligned_empty
from .format import FLAG_END, FLAG_PAYLOAD_CRC, TRAILER_BYTES, Trailer, blocks_for, entry_pack, payload_crc
from .serializer import HostSegment, encode
from .state import StoreState


class _Sblock:
    __slots__ = ("slot", "start", "nblocks", "fill", "index")

    def __init__(self, slot, start, nblocks, index):
        self.slot, self.start, self.nblocks, self.fill, self.index = slot, start, nblocks, 0, index


class StreamWriter:
    def __init__(self, state: StoreState, stream_id: int, slots: list[int]):
        self.state = state  # the store's mounted state (gpuio.streams.state)
        self.stream_id = stream_id
        self.slots = list(slots)
        self._free_slots = list(slots)
        self._ready: collections.deque[tuple[int, int]] = collections.deque()  # disk runs for coming sblocks
        self.extents: list[tuple[int, int]] = []  # every run this stream holds, for abort
        self._inflight: collections.deque[tuple[Any, Any]] = collections.deque()  # (handle, slot) of writes
        self._claim: tuple[Trailer, int] | None = None  # (trailer, block) of the last written sblock, whose
        self._tail: np.ndarray | None = None   # trailer claims a full successor; _tail: copy of that block
        self.first: tuple[int, int] | None = None  # (start, eff) of sblock 0, known once it is sealed
        self.bytes_written = 0
        start, n = self._reserve_one()
        self._cur: Any = _Sblock(self._free_slots.pop(), start, n, 0)  # None once the stream is closed

    # -- public path ------------------------------------------------------------------------------------
    def write(self, obj) -> None:
        header, segs = encode(obj)
        total = len(header) + sum(s.nbytes for s in segs)
        self._reserve(total - self._room(), total)
        self._put(HostSegment(header))
        for s in segs:
            self._put(s)
        self.bytes_written += total

    def close(self) -> int:
        """Writes the rest, waits, makes it durable; returns the table entry to publish."""
        bb = self.state.block_bytes
        cur = self._cur
        eff = cur.fill + TRAILER_BYTES
        used = blocks_for(eff, bb)
        claimed = cur.nblocks * bb
        self.state.pool.free(cur.start + used, cur.nblocks - used)
        self.extents[self.extents.index((cur.start, cur.nblocks))] = (cur.start, used)
        cur.nblocks = used
        if cur.index == 0:
            self.first = (cur.start, eff)
        if self._claim is not None and eff != claimed:
            self._drain()  # the predecessor's write must land before its corrected block does
            self._correct_claim(eff)
        self._claim = None
        self._write(cur, 0, 0, FLAG_END)
        self._cur = None
        self._drain()
        self.state.sync_data()
        assert self.first is not None  # sblock 0 was sealed just above at the latest
        return entry_pack(*self.first)

    def abort(self) -> None:
        """Drops the stream: waits for writes in flight (ignoring their errors) and frees its blocks."""
        while self._inflight:
            h, _ = self._inflight.popleft()
            try:
                h.wait()
            except OSError:
                pass
        for start, n in self.extents:
            if n:
                self.state.pool.free(start, n)
        self.extents.clear()

    # -- internals --------------------------------------------------------------------------------------
    def _room(self) -> int:
        return self._cur.nblocks * self.state.block_bytes - TRAILER_BYTES - self._cur.fill

    def _reserve_one(self) -> tuple[int, int]:
        start, n = self.state.pool.alloc_upto(self.state.sblock_blocks, 1)
        self.extents.append((start, n))
        return start, n

    def _reserve(self, need: int, total: int) -> None:
        got = []
        try:
            while need > 0:
                start, n = self.state.pool.alloc_upto(self.state.sblock_blocks, 1)
                got.append((start, n))
                need -= n * self.state.block_bytes - TRAILER_BYTES
        except OSError as e:
            for start, n in got:
                self.state.pool.free(start, n)
            raise OSError(errno.ENOSPC, f"stream store full: stream {self.stream_id} cannot take an object of "
                                        f"{total} B ({self.state.pool.free_blocks} blocks free); nothing of it "
                                        f"was written, the stream is unchanged") from e
        self._ready.extend(got)
        self.extents.extend(got)

    def _put(self, seg) -> None:
        off = 0
        while off < seg.nbytes:
            if self._room() == 0:
                self._advance()
            cur = self._cur
            n = min(self._room(), seg.nbytes - off)
            seg.copy_into(self.state.buffers.view(cur.slot)[cur.fill:cur.fill + n], off)
            cur.fill += n
            off += n

    def _advance(self) -> None:
        """The current sblock is full and more bytes come: write it now, naming the next reserved run as a
        full successor, and continue in a fresh slot."""
        sealed = self._cur
        bb = self.state.block_bytes
        if sealed.index == 0:
            self.first = (sealed.start, sealed.fill + TRAILER_BYTES)
        start, n = self._ready.popleft()
        trailer = self._write(sealed, start, n * bb, 0)
        last = sealed.nblocks - 1  # a full sblock's trailer lies in its last block
        if self._tail is None:     # only streams longer than one sblock need it
            self._tail = aligned_empty(bb)
        self._tail[:] = self.state.buffers.view(sealed.slot)[last * bb:(last + 1) * bb]
        self._claim = (trailer, sealed.start + last)
        self._cur = _Sblock(self._take_slot(), start, n, sealed.index + 1)

    def _correct_claim(self, eff: int) -> None:
        """Rewrites the block holding the previous sblock's trailer with the last sblock's true size."""
        assert self._claim is not None and self._tail is not None  # only called with a claim outstanding
        t, block = self._claim
        bb = self.state.block_bytes
        Trailer(t.flags, t.uuid, t.stream_id, t.index, t.payload_bytes, t.payload_crc, t.next_start, eff) \
            .pack_into(self._tail, bb - TRAILER_BYTES)
        self._inflight.append((self.state.engine.write_async(np.array([block], dtype=np.int64), self._tail), None))

    def _take_slot(self) -> int:
        while not self._free_slots:
            h, slot = self._inflight.popleft()
            h.wait()
            self._free_slots.append(slot)
        return self._free_slots.pop()

    def _write(self, sb: _Sblock, next_start: int, next_eff: int, flags: int) -> Trailer:
        state = self.state
        bb = state.block_bytes
        buf = state.buffers.view(sb.slot)
        crc = 0
        if state.checksum_payload:
            crc, flags = payload_crc(buf[:sb.fill]), flags | FLAG_PAYLOAD_CRC
        eff = sb.fill + TRAILER_BYTES
        t = Trailer(flags, state.sb.uuid, self.stream_id, sb.index, sb.fill, crc, next_start, next_eff)
        t.pack_into(buf, sb.fill)
        used = blocks_for(eff, bb)
        buf[eff:used * bb] = 0
        blocks = np.arange(sb.start, sb.start + used, dtype=np.int64)
        self._inflight.append((state.engine.write_async(blocks, buf[:used * bb]), sb.slot))
        return t

    def _drain(self) -> None:
        while self._inflight:
            h, slot = self._inflight.popleft()
            h.wait()
            if slot is not None:  # None: the trailer correction, written from _tail
                self._free_slots.append(slot)

__all__ = ["StreamWriter"]
