"""The shared stream-buffer pool: one aligned host allocation cut into sblock-sized slots.

Every open stream takes its circular FIFO of slots from here when it opens and returns them when it
closes, so the store's buffer memory is ``buffer_pool_bytes`` whatever the number of streams. Slots are
4096-byte aligned so the engine's O_DIRECT path reads and writes them without staging.
"""
from __future__ import annotations

import numpy as np

ALIGN_BYTES = 4096


def aligned_empty(nbytes: int, align: int = ALIGN_BYTES) -> np.ndarray:
    raw = np.empty(nbytes + align, dtype=np.uint8)
    offset = (-raw.ctypes.data) % align
    return raw[offset:offset + nbytes]


class BufferPool:
    def __init__(self, pool_bytes: int, slot_bytes: int):
        if slot_bytes <= 0 or slot_bytes % ALIGN_BYTES:
            raise ValueError(f"slot_bytes {slot_bytes} must be a positive multiple of {ALIGN_BYTES}")
        if pool_bytes < slot_bytes:
            raise ValueError(f"buffer_pool_bytes {pool_bytes} is smaller than one sblock ({slot_bytes} B)")
        self.slot_bytes = slot_bytes
        self.slots_max = pool_bytes // slot_bytes
        self._memory = aligned_empty(self.slots_max * slot_bytes)
        self._free = list(range(self.slots_max - 1, -1, -1))

    @property
    def free_slots(self) -> int:
        return len(self._free)

    def take(self, want: int, need: int, who: str) -> list[int]:
        """Up to ``want`` slots, at least ``need``; raises RuntimeError naming ``who`` when the pool cannot."""
        if len(self._free) < need:
            raise RuntimeError(f"stream buffer pool exhausted: {who} needs {need} sblock buffers of "
                               f"{self.slot_bytes} B, {len(self._free)} of {self.slots_max} are free "
                               f"(close streams or raise buffer_pool_bytes)")
        n = min(want, len(self._free))
        return [self._free.pop() for _ in range(n)]

    def give(self, slots: list[int]) -> None:
        self._free.extend(slots)

    def view(self, slot: int) -> np.ndarray:
        return self._memory[slot * self.slot_bytes:(slot + 1) * self.slot_bytes]
