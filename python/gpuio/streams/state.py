"""A StreamStore's mounted state in one process: what its writers, readers and checker work on.

The store makes a `StoreState` each time it opens its device set (at construction, in a process that received it,
after a fork) and hands that object, never itself, to each StreamWriter and StreamReader and to check(). They read
and change the store's blocks, table and buffers only through it; the store's own fields (its lock, mode, open
handles) stay its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from ..engine import aligned_empty
from . import chain
from .buffers import BufferPool
from .format import TRAILER_BYTES, Superblock, blocks_for
from .freepool import FreePool
from .table import StreamTable


@dataclass(eq=False)
class StoreState:
    """The device set and what is mounted on it (see the module docstring)."""

    engine: Any                 # the device set: a gpuio Target (engine=..., or one of the process engine)
    sb: Superblock
    block_bytes: int
    sblock_blocks: int          # blocks per sblock
    durable: bool               # sync_data() syncs the devices
    checksum_payload: bool      # CRC-32C of each sblock's payload
    buffers: BufferPool         # the stream buffer slots of every open stream
    meta_buf: np.ndarray = field(init=False)  # two blocks for table pages and trailers
    table: StreamTable = field(init=False)
    pool: FreePool = field(init=False)
    writers: dict = field(default_factory=dict)    # stream id -> OpenStream being written here
    consumers: set = field(default_factory=set)    # read_and_destroy readers: their blocks are off the table

    def __post_init__(self) -> None:
        self.meta_buf = aligned_empty(2 * self.block_bytes)

    def sync_data(self) -> None:
        """Make the writes so far durable, when the store is (durable=True)."""
        if self.durable:
            self.engine.sync()

    def load_table(self) -> StreamTable:
        """The stream table as the device holds it now (the newest valid copy of each page)."""
        sb = self.sb
        table = StreamTable(sb)
        region = aligned_empty(2 * sb.table_pages * self.block_bytes)
        self.engine.read(np.arange(sb.table_start, sb.data_start, dtype=np.int64), region)
        table.load(region)
        return table

    def walk_pool(self) -> FreePool:
        """The free pool: every block that no chain of the table holds (each chain walked, trailers checked)."""
        pool = FreePool(self.sb.total_blocks, self.sb.data_start)
        chain.walk(self.engine, self.sb, ((i, self.table.entries[i]) for i in self.table.live_ids()),
                   lambda sid, index, start, used, t: pool.mark_used(start, used))
        return pool

    def chain_from(self, sid: int, start: int, eff: int, index: int) -> Iterator[tuple[int, int]]:
        """Yields (start, used_blocks) of each sblock from the given one to the end, checking each trailer."""
        bb, buf = self.block_bytes, self.meta_buf
        while True:
            chain.check_extent(self.sb, sid, index, start, eff)
            self.engine.read(np.array(chain.trailer_blocks(start, eff, bb), dtype=np.int64), buf)
            t = chain.validate(self.sb, buf, (eff - TRAILER_BYTES) % bb, sid, index, start, eff)
            yield start, blocks_for(eff, bb)
            if t.end:
                return
            start, eff, index = t.next_start, t.next_eff, index + 1

__all__ = ["StoreState"]
