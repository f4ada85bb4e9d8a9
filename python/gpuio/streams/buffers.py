"""The shared stream-buffer pool: one aligned host allocation cut into sblock-sized slots.

Every open stream takes its circular FIFO of slots from here when it opens and returns them when it
closes, so the store's buffer memory is ``buffer_pool_bytes`` whatever the number of streams. Slots are
4096-byte aligned so the engine's O_DIRECT path reads and writes them without staging.

The first read into a CUDA device page-locks the pool for CUDA (cudaHostRegister, in place): the stream
buffer then plays the role of the engine's GPU staging, and CUDA-bound bytes leave it by DMA on a copy
engine (SSD -> O_DIRECT into the pinned slot -> GPU), not through CUDA's pageable bounce buffer.
"""
from __future__ import annotations

import numpy as np

from ..engine import ALIGN_BYTES, aligned_empty


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
        self._pinned: bool | None = None  # None: never asked; False: CUDA refused (pageable copies)

    @property
    def pinned(self) -> bool:
        return bool(self._pinned)

    def pin_for_cuda(self) -> bool:
        """Registers the pool with CUDA once (page-locked, DMA-able); False where CUDA refuses."""
        if self._pinned is None:
            import torch
            try:
                err = torch.cuda.cudart().cudaHostRegister(self._memory.ctypes.data, self._memory.nbytes, 0)
                self._pinned = int(err) == 0
            except (RuntimeError, AttributeError):
                self._pinned = False
        return self._pinned

    def unpin(self) -> None:
        """Undoes pin_for_cuda (before the memory goes away: the store's close)."""
        if self._pinned:
            import torch
            torch.cuda.cudart().cudaHostUnregister(self._memory.ctypes.data)
        self._pinned = None

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

__all__ = ["BufferPool"]
