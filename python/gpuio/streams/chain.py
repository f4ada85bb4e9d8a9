"""Walking sblock chains by their trailers: used by open (to rebuild the free pool), destroy and check().

Chains are walked level by level: the trailers of the i-th sblock of many streams are read in one engine
batch (only the block holding each trailer), which keeps open() to one round trip per chain level.
"""
from __future__ import annotations

import numpy as np

from ..engine import aligned_empty
from .format import TRAILER_BYTES, StreamStoreCorrupt, Trailer, blocks_for, entry_unpack

BATCH_TRAILERS_MAX = 1024  # trailer blocks read per engine batch


def walk(engine, sb, heads, on_sblock) -> None:
    """Follows every chain in ``heads`` (iterable of (stream_id, entry)). Calls
    ``on_sblock(stream_id, index, start_block, used_blocks, trailer)`` per sblock; raises StreamStoreCorrupt
    on the first broken link, naming the stream, sblock index and block."""
    bb = sb.block_bytes
    buf = aligned_empty(2 * BATCH_TRAILERS_MAX * bb)
    frontier = []
    for sid, entry in heads:
        start, eff = entry_unpack(entry)
        frontier.append((int(sid), 0, start, eff))
    while frontier:
        nxt = []
        for lo in range(0, len(frontier), BATCH_TRAILERS_MAX):
            part = frontier[lo:lo + BATCH_TRAILERS_MAX]
            blocks = np.empty(2 * len(part), dtype=np.int64)
            for i, (sid, index, start, eff) in enumerate(part):
                check_extent(sb, sid, index, start, eff)
                blocks[2 * i:2 * i + 2] = trailer_blocks(start, eff, bb)
            engine.read(blocks, buf[:len(blocks) * bb])
            for i, (sid, index, start, eff) in enumerate(part):
                off = 2 * i * bb + (eff - TRAILER_BYTES) % bb
                t = validate(sb, buf, off, sid, index, start, eff)
                on_sblock(sid, index, start, blocks_for(eff, bb), t)
                if not t.end:
                    nxt.append((sid, index + 1, t.next_start, t.next_eff))
        frontier = nxt


def trailer_blocks(start: int, eff: int, bb: int) -> tuple[int, int]:
    """The two blocks to read so that the trailer lies at ``(eff - TRAILER_BYTES) % bb`` in them: a trailer
    may straddle a block boundary; when it does not, the second block repeats the first."""
    first, last = start + (eff - TRAILER_BYTES) // bb, start + (eff - 1) // bb
    return first, last


def check_extent(sb, sid: int, index: int, start: int, eff: int) -> None:
    if eff < TRAILER_BYTES or start < sb.data_start or start + blocks_for(eff, sb.block_bytes) > sb.total_blocks:
        raise StreamStoreCorrupt(f"stream {sid}: sblock {index} points outside the data region "
                                 f"(start block {start}, {eff} B)")


def validate(sb, buf, off: int, sid: int, index: int, start: int, eff: int) -> Trailer:
    t = Trailer.unpack_from(buf, off)
    if t is None or t.uuid != sb.uuid or t.stream_id != sid or t.index != index or \
            t.payload_bytes != eff - TRAILER_BYTES:
        why = "no valid trailer" if t is None else (
            f"trailer of stream {t.stream_id} sblock {t.index} ({t.payload_bytes} B payload)")
        raise StreamStoreCorrupt(f"stream {sid}: sblock {index} at block {start} ({eff} B) has {why}")
    if not t.end:
        check_extent(sb, sid, index + 1, t.next_start, t.next_eff)
    return t

__all__ = ["BATCH_TRAILERS_MAX", "walk", "trailer_blocks", "check_extent", "validate"]
