"""StreamStore.check(): the on-disk table, every chain and the free pool agree."""
from __future__ import annotations

import numpy as np

from . import chain
from .format import StreamStoreCorrupt
from .state import StoreState


def check_store(state: StoreState) -> dict:
    """The checks of StreamStore.check() on the store's mounted state; raises StreamStoreCorrupt naming the first
    problem, returns counts."""
    sb = state.sb
    # 1. The table on disk (newest valid slot of each page) is exactly the table in memory.
    disk = state.load_table()
    damaged = state.table.damaged + [d for d in disk.damaged if d not in state.table.damaged]
    if damaged:  # found at mount (and perhaps overwritten since) or now: either way reported, never silent
        raise StreamStoreCorrupt(damaged[0] + (f" (and {len(damaged) - 1} more pages)" if len(damaged) > 1 else ""))
    diff = np.flatnonzero(disk.entries != state.table.entries)
    if diff.size:
        i = int(diff[0])
        raise StreamStoreCorrupt(f"stream table on disk differs from memory at stream {i} "
                                 f"(disk {int(disk.entries[i]):#x}, memory {int(state.table.entries[i]):#x}; "
                                 f"{diff.size} entries differ)")
    # 2. Every chain is intact and no block is claimed twice.
    owner = np.zeros(sb.total_blocks, dtype=np.bool_)
    owner[:sb.data_start] = True
    counts = {"streams": 0, "sblocks": 0, "stream_blocks": 0}

    def claim(sid, index, start, used, trailer):
        seg = owner[start:start + used]
        if seg.any():
            raise StreamStoreCorrupt(f"stream {sid}: sblock {index} at block {start} overlaps blocks "
                                     f"already in use (block {start + int(np.argmax(seg))})")
        seg[:] = True
        counts["sblocks"] += 1
        counts["stream_blocks"] += used

    ids = state.table.live_ids()
    counts["streams"] = int(ids.size)
    chain.walk(state.engine, sb, ((i, state.table.entries[i]) for i in ids), claim)
    # 3. Blocks held by open writers (not yet published) are in use too.
    for sd in state.writers.values():
        for start, n in sd.io.extents:
            if n:
                claim(sd.stream_id, -1, start, n, None)
    # Blocks a consuming reader has not freed yet belong to it.
    # 4. The free pool is the complement of the claimed blocks.
    pool = state.pool.used
    reading = _consuming_blocks(state)
    if reading is not None:
        owner |= reading
    bad = np.flatnonzero(owner != pool)
    if bad.size:
        b = int(bad[0])
        what = "marked used but owned by no stream (leak)" if pool[b] else "owned by a stream but marked free"
        raise StreamStoreCorrupt(f"free pool disagrees with the chains at block {b}: {what} "
                                 f"({bad.size} blocks disagree)")
    if int((~pool).sum()) != state.pool.free_blocks:
        raise StreamStoreCorrupt(f"free pool counts {state.pool.free_blocks} free blocks, "
                                 f"its map has {int((~pool).sum())}")
    counts["free_blocks"] = state.pool.free_blocks
    return counts


def _consuming_blocks(state: StoreState):
    """Blocks still held by read_and_destroy readers: they left the table but are not free yet."""
    if not state.consumers:
        return None
    held = np.zeros(state.sb.total_blocks, dtype=np.bool_)
    for r in state.consumers:
        for start, n in r.held_extents():
            held[start:start + n] = True
    return held

__all__ = ["check_store"]
