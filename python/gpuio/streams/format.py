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

A table page copy is ``head stamp | entries | tail stamp``: both stamps carry (page, seq, uuid) under their
own CRC, and a body CRC covers the entries. That tells two failures apart that look alike otherwise
(page_unpack's states): a *torn* copy (its first and last sectors come from different writes, or one was
never written: a crash during the write, which was never acknowledged, so the older copy is the truth)
from a *damaged* one (both stamps intact and equal, yet the body or a stamp fails its CRC: the write had
completed, so it may have been acknowledged, and falling back to the older copy silently could resurrect
a destroyed stream or drop the last published one). Version 2 added the stamps and made the payload
checksum CRC-32C.
"""
from __future__ import annotations

import dataclasses
import struct
import zlib

FORMAT_VERSION = 2
SUPER_MAGIC = b"GPUIOSTR"
PAGE_MAGIC = 0x47504754  # "TGPG"
PAGE_TAIL_MAGIC = 0x45504754  # "TGPE"
TRAILER_MAGIC = 0x314B4253  # "SBK1"
TRAILER_BYTES = 64

FLAG_END = 1           # last sblock of its stream
FLAG_PAYLOAD_CRC = 2   # payload_crc holds the CRC-32C (Castagnoli) of the payload

# Table entry: start block in the high 40 bits, effective size in bytes in the low 24 bits.
ENTRY_EFF_BITS = 24
ENTRY_EFF_MASK = (1 << ENTRY_EFF_BITS) - 1
ENTRY_START_MAX = (1 << 40) - 1
SBLOCK_BYTES_MAX = 1 << 23  # 8 MiB: an effective size must fit ENTRY_EFF_BITS

_SUPER = struct.Struct("<8sIIIIQQQQ")         # magic ver block streams_max pages total table_start data_start uuid
_STAMP = struct.Struct("<IIQQII")             # magic page seq uuid body_crc stamp_crc (32 bytes, head and tail)
_TRAILER = struct.Struct("<IHHQQQIIQI8xI")     # 64 bytes, CRC-32 of the first 60 last
assert _TRAILER.size == TRAILER_BYTES and _STAMP.size == 32


class StreamStoreCorrupt(OSError):
    """Metadata on disk that fails its checks (bad magic, CRC, uuid, or a broken chain)."""


class StreamStoreWarning(UserWarning):
    """The store mounted, but found metadata damaged after it was written (see StreamStore.check())."""


def payload_crc(buf) -> int:
    """CRC-32C of a payload (1-D uint8 array): SSE4.2 in the C++ core, GIL released. See streams_bench.py
    for its cost against stream read throughput (the reason it is on by default)."""
    from .. import _core

    return _core.crc32c(buf)


def crc32c_hardware() -> bool:
    """True when payload_crc runs on the CPU's CRC-32C instruction (SSE4.2), False for the table fallback."""
    from .. import _core

    return bool(_core.crc32c_hardware())


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
    return (block_bytes - 2 * _STAMP.size) // 8


def _body_crc(body, page: int, seq: int, uuid: int) -> int:
    return zlib.crc32(body, zlib.crc32(struct.pack("<IQQ", page, seq, uuid)))


def _stamp_pack(out, offset: int, magic: int, page: int, seq: int, uuid: int, body_crc: int) -> None:
    _STAMP.pack_into(out, offset, magic, page, seq, uuid, body_crc, 0)
    struct.pack_into("<I", out, offset + 28, zlib.crc32(bytes(out[offset:offset + 28])))


def _stamp_unpack(buf, offset: int, magic: int, page: int, uuid: int):
    """None: not a stamp of this page and store (never written: zeros, since formatting zeroes the table
    region; or a whole stamp of another page or format); "bad": anything else that fails the stamp's own CRC
    (a damaged sector: sectors are written whole, so no tear makes one); else (seq, body_crc)."""
    m, pg, seq, uid, bcrc, scrc = _STAMP.unpack_from(buf, offset)
    raw = bytes(buf[offset:offset + 28])
    if scrc != zlib.crc32(raw):
        return None if scrc == 0 and not any(raw) else "bad"
    if m != magic or pg != page or uid != uuid:
        return None
    return seq, bcrc


def page_pack(out, page: int, seq: int, uuid: int, entries) -> None:
    """Writes table page ``page`` (entries: uint64 array of entries_per_page) into ``out`` (one block, uint8)."""
    body = memoryview(entries).cast("B")
    crc = _body_crc(body, page, seq, uuid)
    out[_STAMP.size:_STAMP.size + len(body)] = body
    out[_STAMP.size + len(body):] = 0
    _stamp_pack(out, 0, PAGE_MAGIC, page, seq, uuid, crc)
    _stamp_pack(out, len(out) - _STAMP.size, PAGE_TAIL_MAGIC, page, seq, uuid, crc)


VALID, EMPTY, TORN, DAMAGED = "valid", "empty", "torn", "damaged"


def page_unpack(buf, page: int, uuid: int):
    """Classifies one copy of a table page: (state, seq, entries view).

    VALID (seq, entries); EMPTY (never written in this store); TORN (its stamps come from different writes,
    or only one of them was written: an interrupted write, never acknowledged); DAMAGED (changed after its
    write completed: both stamps agree but the body fails its CRC, or a stamp fails its own; seq is the
    seq the copy claims, None when no intact stamp says)."""
    head = _stamp_unpack(buf, 0, PAGE_MAGIC, page, uuid)
    tail = _stamp_unpack(buf, len(buf) - _STAMP.size, PAGE_TAIL_MAGIC, page, uuid)
    if head == "bad" or tail == "bad":
        other = tail if head == "bad" else head
        return DAMAGED, (other[0] if isinstance(other, tuple) else None), None
    if head is None and tail is None:
        return EMPTY, None, None
    if head is None or tail is None or head != tail:
        return TORN, None, None
    seq, crc = head
    body = buf[_STAMP.size:_STAMP.size + 8 * entries_per_page(len(buf))]
    if crc != _body_crc(body, page, seq, uuid):
        return DAMAGED, seq, None
    return VALID, seq, body


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

__all__ = ["FORMAT_VERSION", "SUPER_MAGIC", "PAGE_MAGIC", "PAGE_TAIL_MAGIC", "TRAILER_MAGIC", "TRAILER_BYTES",
           "FLAG_END", "FLAG_PAYLOAD_CRC", "ENTRY_EFF_BITS", "ENTRY_EFF_MASK", "ENTRY_START_MAX", "SBLOCK_BYTES_MAX",
           "StreamStoreCorrupt", "StreamStoreWarning", "payload_crc", "crc32c_hardware", "entry_pack", "entry_unpack",
           "blocks_for", "Superblock", "entries_per_page", "page_pack", "VALID", "EMPTY", "TORN", "DAMAGED",
           "page_unpack", "Trailer"]
