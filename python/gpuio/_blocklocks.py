"""Striped block locks for read-modify-write of shared blocks (TensorFile.scatter) with lock-free readers.

Writers take the locks of the stripes their blocks fall in (block id mod STRIPES), in ascending order (no
deadlock), and bump each stripe's version to odd before writing and back to even after: two scatters
touching the same block are serialised, so rows that share a block never lose each other's writes.
Readers take no lock (a data loader's gathers stay parallel): they note the versions of their stripes
before reading and compare after; an odd or changed version means a write overlapped the read, and the
reader reads again (a seqlock). After READ_TRIES overlapped attempts a reader takes the stripe locks
itself, so it always ends.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np

STRIPES = 256      # lock stripes per file: distinct blocks rarely share one, a full sweep takes them all
READ_TRIES = 8     # optimistic reads before a reader locks out writers


class BlockLocks:
    def __init__(self, stripes: int = STRIPES):
        if stripes < 1 or stripes & (stripes - 1):
            raise ValueError(f"stripes must be a power of two, got {stripes}")
        self._locks = [threading.Lock() for _ in range(stripes)]
        self._version = np.zeros(stripes, dtype=np.int64)
        self.stripes = stripes

    def stripes_of(self, blocks) -> np.ndarray:
        """Sorted distinct stripes of the (int64, NumPy or CPU torch) block ids."""
        hit = np.zeros(self.stripes, dtype=np.bool_)
        hit[np.asarray(blocks, dtype=np.int64) & (self.stripes - 1)] = True  # O(n), no sort: gathers pay this
        return np.flatnonzero(hit)

    @contextmanager
    def writing(self, stripes: np.ndarray):
        """Hold the stripes exclusively; readers that overlap see their versions move and read again."""
        taken = []
        try:
            for s in stripes.tolist():
                self._locks[s].acquire()
                taken.append(s)
            self._version[stripes] += 1  # odd: a write is in progress
            yield
        finally:
            if len(taken) == len(stripes):
                self._version[stripes] += 1  # even again: the write has ended (or failed)
            for s in reversed(taken):
                self._locks[s].release()

    def snapshot(self, stripes: np.ndarray) -> np.ndarray:
        return self._version[stripes].copy()

    def unchanged(self, stripes: np.ndarray, before: np.ndarray) -> bool:
        """True when no write to these stripes was in progress at the snapshot or started since."""
        return not (before & 1).any() and np.array_equal(self._version[stripes], before)
