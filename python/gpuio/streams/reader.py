"""Reading one stream through its circular FIFO of buffer slots, with read-ahead.

A chain only reveals sblock i+1's location once sblock i has arrived, which would leave one read in flight.
The reader therefore *speculates*: a writer lays a stream's full sblocks out back to back when the free
pool allows, so after a full sblock at block s it also reads [s + sblock_blocks, ...) ahead, up to
``prefetch_depth`` sblocks in flight. Every sblock is checked against the trailer pointer of its
predecessor (start, effective size) and its own trailer (store uuid, stream id, index, CRC) before a byte
of it is used; a wrong guess is dropped and the true location read instead, so speculation costs
bandwidth, never correctness.

Fences: a consumer that copies out of a slot asynchronously (CUDA tensors: slot -> GPU by DMA, queued on
the current stream) hands the reader a *fence* (anything with ``query()`` and ``synchronize()``, e.g. a
``torch.cuda.Event`` recorded after the copies). A released slot with a pending fence is not read into
again until the fence has passed, so the copies overlap the next sblocks' consumption and read-ahead.
"""
from __future__ import annotations

import collections
from typing import Any

import numpy as np

from . import chain
from .format import FLAG_PAYLOAD_CRC, TRAILER_BYTES, StreamStoreCorrupt, blocks_for, entry_unpack, payload_crc
from .state import StoreState


class _Fetch:
    __slots__ = ("slot", "start", "nblocks", "handle", "blocks")

    def __init__(self, slot, start, nblocks, handle, blocks):
        self.slot, self.start, self.nblocks, self.handle, self.blocks = slot, start, nblocks, handle, blocks


END = "end"  # StreamReader.position() at the end of the stream


class StreamReader:
    def __init__(self, state: StoreState, stream_id: int, entry: int, slots: list[int], destroy: bool = False,
                 at: tuple | str | None = None):
        """at: a position() of another reader of this stream to go on from (another process's, say); None: the
        stream's first object."""
        self.state = state  # the store's mounted state (gpuio.streams.state)
        self.stream_id = stream_id
        self.entry = entry                     # the table entry the stream had when this reader opened it
        self.slots = list(slots)
        self.destroy = destroy                 # free each sblock once it has been consumed
        self._free_slots = list(slots)
        self._fenced: collections.deque[tuple[int, Any]] = collections.deque()  # (slot, fence) released while
                                                                                # an async copy may read it
        self._fence = None                     # fence of the current slot's outstanding copies
        self._fifo: collections.deque[Any] = collections.deque()
        start, eff = entry_unpack(entry)
        index, self._skip = 0, 0               # _skip: bytes of the first sblock already read (at=)
        if at == END:
            self._expect: tuple[int, int, int] | None = None
        else:
            if at is not None:
                start, eff, index, self._skip = (int(v) for v in at)
            self._expect = (start, eff, index)  # the next sblock to consume; None at END
        self._issue_at: tuple[int, int] | None = None  # (start, nblocks) of the next read to issue; None: wait
        self._cur: tuple[_Fetch, int] | None = None  # (_Fetch, used_blocks) being consumed
        self._at: tuple[int, int, int] | None = None  # (start, eff, index) of the current sblock
        self._view: np.ndarray | None = None   # payload of the current sblock
        self._off = 0
        self.speculation_misses = 0
        if self._expect is not None:
            self._plan_known(start, eff)
            self._fill()

    def position(self) -> tuple | str:
        """Where the next read starts: (sblock start, effective size, index, bytes into its payload), or END. A
        reader made with at=position() (in any process) reads on from there."""
        if self._at is not None and self._view is not None and self._off < self._view.size:
            return (*self._at, self._off)
        return END if self._expect is None else (*self._expect, 0)

    # -- source interface for the serializer -------------------------------------------------------------
    def at_end(self) -> bool:
        while self._view is None or self._off == self._view.size:
            if not self._next_sblock():
                return True
        return False

    def read_bytes(self, n: int) -> bytes:
        parts = []
        self.consume(n, lambda chunk, off: parts.append(chunk.tobytes()))
        return b"".join(parts)

    def read_into(self, dst: np.ndarray) -> None:
        self.consume(dst.size, lambda chunk, off: np.copyto(dst[off:off + chunk.size], chunk))

    def fence(self, f) -> None:
        """The current slot may still be read by work ``f`` tracks (see the module doc)."""
        self._fence = f

    def consume(self, n: int, fn) -> None:
        done = 0
        while done < n:
            if self._view is None or self._off == self._view.size:
                if not self._next_sblock():
                    raise StreamStoreCorrupt(f"stream {self.stream_id} ends inside a record "
                                             f"({n - done} of {n} B missing)")
                continue
            k = min(n - done, self._view.size - self._off)
            fn(self._view[self._off:self._off + k], done)
            self._off += k
            done += k

    # -- sblock pipeline --------------------------------------------------------------------------------
    def _plan_known(self, start: int, eff: int) -> None:
        self._issue_at = (start, blocks_for(eff, self.state.block_bytes))

    def _unfence(self, block: bool = False, every: bool = False) -> None:
        """Returns fenced slots whose copies have finished; ``block``: wait for the oldest if no slot is free;
        ``every``: wait for all of them."""
        while self._fenced and (every or self._fenced[0][1].query() or (block and not self._free_slots)):
            slot, f = self._fenced.popleft()
            f.synchronize()
            self._free_slots.append(slot)

    def _fill(self) -> None:
        state = self.state
        self._unfence(block=not self._fifo)  # an empty FIFO must get a read, so wait for a slot then
        while self._free_slots and self._issue_at is not None:
            start, n = self._issue_at
            slot = self._free_slots.pop()
            blocks = np.arange(start, start + n, dtype=np.int64)
            handle = state.engine.read_async(blocks, state.buffers.view(slot)[:n * state.block_bytes])
            self._fifo.append(_Fetch(slot, start, n, handle, blocks))
            nxt = start + n
            if n == state.sblock_blocks and nxt < state.sb.total_blocks:
                self._issue_at = (nxt, min(state.sblock_blocks, state.sb.total_blocks - nxt))
            else:
                self._issue_at = None

    def _release_current(self) -> None:
        if self._cur is None:
            return
        fetch, used = self._cur
        if self._fence is not None:
            self._fenced.append((fetch.slot, self._fence))
            self._fence = None
        else:
            self._free_slots.append(fetch.slot)
        if self.destroy:
            self.state.pool.free(fetch.start, used)
        self._cur, self._view, self._off = None, None, 0

    def _drain_fifo(self) -> None:
        """Drops the reads ahead; their errors do not matter (a guess past the device end, say)."""
        while self._fifo:
            f = self._fifo.popleft()
            try:
                f.handle.wait()
            except OSError:
                pass
            self._free_slots.append(f.slot)

    def _next_sblock(self) -> bool:
        """Moves to the next sblock; False at the end of the stream."""
        self._release_current()
        if self._expect is None:
            return False
        start, eff, index = self._expect
        used = blocks_for(eff, self.state.block_bytes)
        if not self._fifo:
            self._plan_known(start, eff)
            self._fill()
        f = self._fifo[0]
        if f.start != start or f.nblocks < used:  # speculation missed: drop it, read the true location
            self.speculation_misses += 1
            self._drain_fifo()
            self._plan_known(start, eff)
            self._fill()
            f = self._fifo[0]
        f.handle.wait()
        self._fifo.popleft()
        sb = self.state.sb
        buf = self.state.buffers.view(f.slot)
        chain.check_extent(sb, self.stream_id, index, start, eff)
        t = chain.validate(sb, buf, eff - TRAILER_BYTES, self.stream_id, index, start, eff)
        if t.flags & FLAG_PAYLOAD_CRC and payload_crc(buf[:t.payload_bytes]) != t.payload_crc:
            raise StreamStoreCorrupt(f"stream {self.stream_id}: sblock {index} at block {start} fails its "
                                     f"payload CRC-32C (the data changed on the device after it was written)")
        self._cur, self._at = (f, used), (start, eff, index)
        self._view, self._off = buf[:t.payload_bytes], 0
        if self._skip:  # the first sblock of a reader made at a position: what was read there is skipped
            if self._skip > t.payload_bytes:
                raise StreamStoreCorrupt(f"stream {self.stream_id}: position {self._skip} lies past the "
                                         f"{t.payload_bytes} payload bytes of sblock {index}")
            self._off, self._skip = self._skip, 0
        if t.end:
            self._expect = None
            self._issue_at = None
            self._drain_fifo()
        else:
            self._expect = (t.next_start, t.next_eff, index + 1)
            if not self._fifo and self._issue_at is None:
                self._plan_known(t.next_start, t.next_eff)
        self._fill()
        return True

    def remaining_entry(self):
        """(start, eff, index) of the first sblock not yet consumed, or None."""
        return self._expect

    def held_extents(self) -> list[tuple[int, int]]:
        """Blocks of this stream not consumed yet (the current sblock and the rest of the chain)."""
        out = [(self._cur[0].start, self._cur[1])] if self._cur is not None else []
        if self._expect is not None:
            out += list(self.state.chain_from(self.stream_id, *self._expect))
        return out

    def close(self) -> None:
        self._drain_fifo()
        self._release_current()
        self._unfence(every=True)  # the slots go back to the shared pool: no copy may still read them

__all__ = ["END", "StreamReader"]
