"""Free-block pool: one byte per block (``used``), next-fit search for contiguous runs.

Memory is proportional to the device (1 byte per block: 256 KiB per GiB of 4 KiB blocks), not to the
number of streams, and it is never persisted: the store rebuilds it at open by walking the chains of the
published streams, so blocks of streams that were never closed come back free after a crash.

Not thread-safe: the store calls it under its lock.
"""
from __future__ import annotations

import errno

import numpy as np

_SCAN_BLOCKS_MIN = 1 << 14  # blocks examined per numpy pass while searching for a run


class FreePool:
    def __init__(self, total_blocks: int, reserved_blocks: int):
        if not 0 <= reserved_blocks < total_blocks:
            raise ValueError(f"reserved_blocks {reserved_blocks} must be in [0, {total_blocks})")
        self.total_blocks = total_blocks
        self.reserved_blocks = reserved_blocks
        self.used = np.zeros(total_blocks, dtype=np.bool_)
        self.used[:reserved_blocks] = True
        self.free_blocks = total_blocks - reserved_blocks
        self._cursor = reserved_blocks

    # -- allocation -------------------------------------------------------------------------------------
    def alloc(self, nblocks: int) -> int:
        """First run of ``nblocks`` free blocks at or after the cursor (wrapping); returns its start.
        Raises OSError(ENOSPC) naming the request when no such run exists."""
        start = self.find(nblocks)
        if start < 0:
            raise OSError(errno.ENOSPC, f"stream store full: no run of {nblocks} free blocks "
                                        f"({self.free_blocks} blocks free in all)")
        self.mark_used(start, nblocks)
        self._cursor = start + nblocks
        return start

    def alloc_upto(self, nblocks: int, nblocks_min: int = 1) -> tuple[int, int]:
        """A run of ``nblocks`` if there is one, else the longest run of at least ``nblocks_min``.
        Returns (start, length); raises OSError(ENOSPC) when even that fails."""
        start = self.find(nblocks)
        if start >= 0:
            self.mark_used(start, nblocks)
            self._cursor = start + nblocks
            return start, nblocks
        start, length = self.longest_run()
        if length < nblocks_min:
            raise OSError(errno.ENOSPC, f"stream store full: no run of {nblocks_min} free blocks "
                                        f"({self.free_blocks} blocks free in all)")
        self.mark_used(start, length)
        self._cursor = start + length
        return start, length

    def find(self, nblocks: int) -> int:
        if nblocks <= 0:
            raise ValueError(f"nblocks must be positive, got {nblocks}")
        if nblocks > self.free_blocks:
            return -1
        c = self._cursor
        if c + nblocks <= self.total_blocks and not self.used[c:c + nblocks].any():
            return c  # what the scan would find first, without building a window's run list
        hit = self._scan(self._cursor, self.total_blocks, nblocks)
        if hit < 0:
            hit = self._scan(self.reserved_blocks, min(self._cursor + nblocks, self.total_blocks), nblocks)
        return hit

    def _scan(self, lo: int, hi: int, nblocks: int) -> int:
        window = max(_SCAN_BLOCKS_MIN, 4 * nblocks)
        pos = lo
        while pos + nblocks <= hi:
            end = min(hi, pos + window)
            seg = self.used[pos:end]
            starts, lengths = _free_runs(seg)
            ok = np.flatnonzero(lengths >= nblocks)
            if ok.size:
                return pos + int(starts[ok[0]])
            if end >= hi:
                return -1
            # A run may cross the window end: resume at the start of the trailing free run.
            tail = int(starts[-1]) if starts.size and starts[-1] + lengths[-1] == seg.size else seg.size
            pos += max(tail, 1) if tail < seg.size else seg.size
        return -1

    def longest_run(self) -> tuple[int, int]:
        starts, lengths = _free_runs(self.used)
        if not starts.size:
            return 0, 0
        i = int(np.argmax(lengths))
        return int(starts[i]), int(lengths[i])

    # -- bookkeeping ------------------------------------------------------------------------------------
    def mark_used(self, start: int, nblocks: int) -> None:
        self._check_range(start, nblocks)
        seg = self.used[start:start + nblocks]
        if seg.any():
            first = start + int(np.argmax(seg))
            raise AssertionError(f"block {first} of run [{start}, {start + nblocks}) is already in use")
        seg[:] = True
        self.free_blocks -= nblocks

    def free(self, start: int, nblocks: int) -> None:
        if nblocks == 0:
            return
        self._check_range(start, nblocks)
        if start < self.reserved_blocks:
            raise AssertionError(f"free of reserved block {start}")
        seg = self.used[start:start + nblocks]
        if not seg.all():
            first = start + int(np.argmin(seg))
            raise AssertionError(f"double free: block {first} of run [{start}, {start + nblocks}) is free")
        seg[:] = False
        self.free_blocks += nblocks
        if start + nblocks == self._cursor:  # give a trimmed tail back to the next allocation
            self._cursor = start

    def _check_range(self, start: int, nblocks: int) -> None:
        if start < 0 or nblocks < 0 or start + nblocks > self.total_blocks:
            raise AssertionError(f"block run [{start}, {start + nblocks}) outside the device "
                                 f"of {self.total_blocks} blocks")


def _free_runs(used: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and lengths of the runs of False in ``used``."""
    free = np.concatenate(([False], ~used, [False])).view(np.int8)
    edges = np.flatnonzero(np.diff(free))
    return edges[0::2], edges[1::2] - edges[0::2]

__all__ = ["FreePool"]
