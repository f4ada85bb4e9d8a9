"""The stream table in memory: one uint64 entry per stream id (first sblock, packed), plus per table page
the sequence number and slot (A/B) of its newest valid copy on disk.

Updates are shadow writes: the new image of a page goes to the slot that does *not* hold the current copy,
with sequence + 1 and a CRC. A torn or lost write leaves the old copy as the newest valid one, so a page on
disk is always either the old or the new version, never a mix. Not thread-safe: the store holds its lock.
"""
from __future__ import annotations

import numpy as np

from .format import DAMAGED, VALID, Superblock, entries_per_page, page_pack, page_unpack


class StreamTable:
    def __init__(self, sb: Superblock):
        self.sb = sb
        self.per_page = entries_per_page(sb.block_bytes)
        # np.zeros is lazily backed by the OS: untouched pages of the table cost no resident memory.
        self.entries = np.zeros(sb.table_pages * self.per_page, dtype=np.uint64)
        self.page_seq = np.zeros(sb.table_pages, dtype=np.uint64)
        self.page_slot = np.ones(sb.table_pages, dtype=np.uint8)  # slot of the newest copy; empty: 1
        self._cursor = 0
        self.damaged: list[str] = []  # see load()

    def load(self, region: np.ndarray) -> None:
        """Reads the table region (2 * table_pages blocks, as uint8) and keeps the newest valid slot per page.
        A torn copy (a crash mid-write) is passed over silently, as designed; a damaged copy that is newer
        than the one kept (or of unknown age) may hold an acknowledged update, and is recorded in
        ``damaged`` (one line per page) for the store to warn about and check() to report."""
        bb = self.sb.block_bytes
        self.damaged = []
        for p in range(self.sb.table_pages):
            best, hurt = None, []
            for slot in (0, 1):
                off = (2 * p + slot) * bb
                state, seq, body = page_unpack(region[off:off + bb], p, self.sb.uuid)
                if state == VALID and (best is None or seq > best[0]):
                    best = (seq, slot, body)
                elif state == DAMAGED:
                    hurt.append((slot, seq))
            for slot, seq in hurt:
                if best is None or seq is None or seq > best[0]:
                    ids = f"{p * self.per_page}..{min((p + 1) * self.per_page, self.sb.streams_max) - 1}"
                    kept = f"the copy of seq {best[0]} in slot {best[1]}" if best else "no valid copy (empty)"
                    self.damaged.append(
                        f"stream table page {p} (stream ids {ids}): its newest copy (slot {slot}, block "
                        f"{self.sb.slot_block(p, slot)}, seq {seq if seq is not None else 'unknown'}) was fully "
                        f"written but fails its CRC (media damage); using {kept}, so streams published or "
                        f"destroyed in the damaged copy may be wrong")
            if best is not None:
                self.page_seq[p], self.page_slot[p] = best[0], best[1]
                self.entries[p * self.per_page:(p + 1) * self.per_page] = np.frombuffer(best[2], dtype=np.uint64)
        self.entries[self.sb.streams_max:] = 0  # ids past streams_max never exist

    def page_of(self, stream_id: int) -> int:
        return stream_id // self.per_page

    def image(self, page: int, out: np.ndarray) -> tuple[int, int, int]:
        """Packs the next version of ``page`` into ``out``; returns (block, slot, seq) to write it to."""
        seq = int(self.page_seq[page]) + 1
        slot = 1 - int(self.page_slot[page])
        page_pack(out, page, seq, self.sb.uuid, self.entries[page * self.per_page:(page + 1) * self.per_page])
        return self.sb.slot_block(page, slot), slot, seq

    def committed(self, page: int, slot: int, seq: int) -> None:
        self.page_slot[page], self.page_seq[page] = slot, seq

    def live_ids(self) -> np.ndarray:
        return np.flatnonzero(self.entries[:self.sb.streams_max])

    def next_free_id(self, busy) -> int:
        """A stream id with no entry and not in ``busy`` (open writers), searched from a moving cursor so that
        a destroyed id is not handed out again at once. -1 when the table is full."""
        n = self.sb.streams_max
        c = self._cursor
        if c < n and self.entries[c] == 0 and c not in busy:  # the usual case: the id after the last one
            self._cursor = c + 1 if c + 1 < n else 0
            return c
        for lo, hi in ((self._cursor, n), (0, self._cursor)):
            pos = lo
            while pos < hi:
                end = min(hi, pos + 4096)
                for i in np.flatnonzero(self.entries[pos:end] == 0):
                    sid = pos + int(i)
                    if sid not in busy:
                        self._cursor = sid + 1 if sid + 1 < n else 0
                        return sid
                pos = end
        return -1

__all__ = ["StreamTable"]
