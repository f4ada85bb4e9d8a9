"""On-disk format of the stream store: superblock, stream table pages, sblock trailers.

Layout, in logical blocks of ``block_bytes`` (the engine's block size):

    block 0                      superblock (written once, when the store is formatted)
    blocks 1 .. 1 + 2*table_pages  stream table: page p has two slots, A = 1 + 2p and B = 2 + 2p
    blocks data_start ..         sblocks, each a run of contiguous blocks

A stream is a chain of sblocks. Each sblock is ``payload | trailer | zero padding`` where the 64-byte
trailer ends at the sblock's *effective size* ``eff_bytes = payload_bytes + TRAILER_BYTES`` and names the
next sblock (start block, effective size) or carries the END flag. The stream table keeps, per stream id,
one 8-byte entry that packs the first sblock's start block and effective size (0 = no stream).

Every metadata structure carries the store's random ``uuid`` and a CRC-32, so that a torn write, a stale
sblock or table page from an earlier format are recognised instead of trusted.
"""
from __future__ import annotations

import dataclasses
import struct
import zlib

FORMAT_VERSION = 1
SUPER_MAGIC = b"GPUIOSTR"
PAGE_MAGIC = 0x47504754  # "TGPG"
TRAILER_MAGIC = 0x314B4253  # "SBK1"
TRAILER_BYTES = 64

FLAG_END = 1           # last sblock of its stream
FLAG_PAYLOAD_CRC = 2   # payload_crc holds the CRC-32 of the payload

# Table entry: start block in the high 40 bits, effective size in bytes in the low 24 bits.
ENTRY_EFF_BITS = 24
ENTRY_EFF_MASK = (1 << ENTRY_EFF_BITS) - 1
ENTRY_START_MAX = (1 << 40) - 1
SBLOCK_BYTES_MAX = 1 << 23  # 8 MiB: an effective size must fit ENTRY_EFF_BITS

_SUPER = struct.Struct("<8sIIIIQQQQ")         # magic ver block streams_max pages total table_start data_start uuid
_PAGE_HDR = struct.Struct("<IIQQI4x")          # magic page seq uuid crc  (32 bytes)
_TRAILER = struct.Struct("<IHHQQQIIQI8xI")     # 64 bytes, CRC-32 of the first 60 last
assert _TRAILER.size == TRAILER_BYTES and _PAGE_HDR.size == 32


class StreamStoreCorrupt(OSError):
    """Metadata on disk that fails its checks (bad magic, CRC, uuid, or a broken chain)."""


def entry_pack(start_block: int, eff_bytes: int) -> int:
    if not 0 < start_block <= ENTRY_START_MAX:
        raise ValueError(f"sblock start block {start_block} out of range (1..{ENTRY_START_MAX})")
    if not TRAILER_BYTES <= eff_bytes <= ENTRY_EFF_MASK:
        raise ValueError(f"sblock effective size {eff_bytes} out of range ({TRAILER_BYTES}..{ENTRY_EFF_MASK})")
    return (start_block << ENTRY_EFF_BITS) | eff_bytes


def entry_unpack(entry: int) -> tuple[int, int]:
    return int(entry) >> ENTRY_EFF_BITS, int(entry) & ENTRY_EFF_MASK


def blocks_for(nbytes: int, block_bytes: int) -> int:
    return -(-nbytes // block_bytes)


@dataclasses.dataclass(frozen=True)
class Superblock:
    block_bytes: int
    streams_max: int
    table_pages: int
    total_blocks: int
    table_start: int
    data_start: int
    uuid: int

    @staticmethod
    def plan(block_bytes: int, total_blocks: int, streams_max: int, uuid: int) -> "Superblock":
        per_page = entries_per_page(block_bytes)
        pages = blocks_for(streams_max, per_page)
        data_start = 1 + 2 * pages
        if data_start >= total_blocks:
            raise ValueError(f"device of {total_blocks} blocks of {block_bytes} B is too small for a stream table "
                             f"of {streams_max} streams ({2 * pages} blocks)")
        return Superblock(block_bytes, streams_max, pages, total_blocks, 1, data_start, uuid)

    def pack(self) -> bytes:
        body = _SUPER.pack(SUPER_MAGIC, FORMAT_VERSION, self.block_bytes, self.streams_max, self.table_pages,
                           self.total_blocks, self.table_start, self.data_start, self.uuid)
        return body + struct.pack("<I", zlib.crc32(body))

    @staticmethod
    def unpack(buf) -> "Superblock":
        raw = bytes(buf[:_SUPER.size + 4])
        magic, ver, block, smax, pages, total, tstart, dstart, uuid = _SUPER.unpack_from(raw)
        if magic != SUPER_MAGIC:
            raise StreamStoreCorrupt(f"not a gpuio stream store: superblock magic {magic!r}")
        (crc,) = struct.unpack_from("<I", raw, _SUPER.size)
        if crc != zlib.crc32(raw[:_SUPER.size]):
            raise StreamStoreCorrupt("stream store superblock fails its CRC-32 (torn or damaged)")
        if ver != FORMAT_VERSION:
            raise StreamStoreCorrupt(f"stream store format version {ver}; this gpuio reads {FORMAT_VERSION}")
        return Superblock(block, smax, pages, total, tstart, dstart, uuid)

    def slot_block(self, page: int, slot: int) -> int:
        return self.table_start + 2 * page + slot


def entries_per_page(block_bytes: int) -> int:
    return (block_bytes - _PAGE_HDR.size) // 8


def page_pack(out, page: int, seq: int, uuid: int, entries) -> None:
    """Writes table page ``page`` (entries: uint64 array of entries_per_page) into ``out`` (one block, uint8)."""
    body = memoryview(entries).cast("B")
    crc = zlib.crc32(body, zlib.crc32(struct.pack("<IQQ", page, seq, uuid)))
    _PAGE_HDR.pack_into(out, 0, PAGE_MAGIC, page, seq, uuid, crc)
    out[_PAGE_HDR.size:_PAGE_HDR.size + len(body)] = body
    out[_PAGE_HDR.size + len(body):] = 0


def page_unpack(buf, page: int, uuid: int):
    """Returns (seq, entries view) of a valid slot, or None for a slot that is empty, torn or stale."""
    magic, pg, seq, uid, crc = _PAGE_HDR.unpack_from(buf, 0)
    if magic != PAGE_MAGIC or pg != page or uid != uuid:
        return None
    n = entries_per_page(len(buf))
    body = buf[_PAGE_HDR.size:_PAGE_HDR.size + 8 * n]
    if crc != zlib.crc32(body, zlib.crc32(struct.pack("<IQQ", page, seq, uuid))):
        return None
    return seq, body


@dataclasses.dataclass(frozen=True)
class Trailer:
    flags: int
    uuid: int
    stream_id: int
    index: int          # position of this sblock in its stream, from 0
    payload_bytes: int
    payload_crc: int
    next_start: int     # 0 when FLAG_END
    next_eff: int

    @property
    def end(self) -> bool:
        return bool(self.flags & FLAG_END)

    def pack_into(self, buf, offset: int) -> None:
        _TRAILER.pack_into(buf, offset, TRAILER_MAGIC, self.flags, 0, self.uuid, self.stream_id, self.index,
                           self.payload_bytes, self.payload_crc, self.next_start, self.next_eff, 0)
        crc = zlib.crc32(buf[offset:offset + TRAILER_BYTES - 4])
        struct.pack_into("<I", buf, offset + TRAILER_BYTES - 4, crc)

    @staticmethod
    def unpack_from(buf, offset: int) -> "Trailer | None":
        """The trailer at ``offset``, or None when it is not a valid trailer (torn, stale, never written)."""
        fields = _TRAILER.unpack_from(buf, offset)
        if fields[0] != TRAILER_MAGIC or fields[-1] != zlib.crc32(buf[offset:offset + TRAILER_BYTES - 4]):
            return None
        _, flags, _, uuid, sid, index, pbytes, pcrc, nstart, neff, _ = fields
        return Trailer(flags, uuid, sid, index, pbytes, pcrc, nstart, neff)
