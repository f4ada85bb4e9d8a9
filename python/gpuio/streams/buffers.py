"""The shared stream-buffer pool: one aligned host allocation cut into sblock-sized slots.

Every open stream takes its circular FIFO of slots from here when it opens and returns them when it
closes, so the store's buffer memory is ``buffer_pool_bytes`` whatever the number of streams. The allocation
is an owned block of the process's one pinned pool (gpuio._pinned: 2 MiB aligned, 2 MiB pages where the kernel
gives them), so slots are 4096-byte aligned and the engine's O_DIRECT path reads and writes them without staging.

The first read into a CUDA device page-locks the block for CUDA (cudaHostRegister, in place, counted in the pool's
stats as stream_buffers): the stream buffer then plays the role of the engine's GPU staging, and CUDA-bound bytes
leave it by DMA on a copy engine (SSD -> O_DIRECT into the pinned slot -> GPU), not through CUDA's pageable bounce
buffer.
"""
from __future__ import annotations

import numpy as np

from .. import _core
from ..engine import ALIGN_BYTES


class BufferPool:
    def __init__(self, pool_bytes: int, slot_bytes: int):
        if slot_bytes <= 0 or slot_bytes % ALIGN_BYTES:
            raise ValueError(f"slot_bytes {slot_bytes} must be a positive multiple of {ALIGN_BYTES}")
        if pool_bytes < slot_bytes:
            raise ValueError(f"buffer_pool_bytes {pool_bytes} is smaller than one sblock ({slot_bytes} B)")
        self.slot_bytes = slot_bytes
        self.slots_max = pool_bytes // slot_bytes
        # faulted in as slots are used (an engine read or a copy), not now
        self._block = _core.pinned_take(self.slots_max * slot_bytes, registered=False, pooled=False,
                                        use="stream_buffers", touch=False)
        self._memory = self._block.array()
        self._free = list(range(self.slots_max - 1, -1, -1))
        self._pinned: bool | None = None  # None: never asked; False: CUDA refused (pageable copies)

    @property
    def pinned(self) -> bool:
        return bool(self._pinned)

    def pin_for_cuda(self) -> bool:
        """Registers the pool with CUDA once (page-locked, DMA-able); False where CUDA refuses (or cannot be used:
        a forked child of a CUDA process)."""
        if self._pinned is None:
            from ..gpu import in_bad_fork

            self._pinned = not in_bad_fork() and self._block.register()
        return self._pinned

    def unpin(self) -> None:
        """Undoes pin_for_cuda (the store's close; the block's end would undo it too)."""
        if self._pinned:
            self._block.unregister()
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
