"""The stream table tells a torn newest copy (a crash mid-write: fall back silently, as designed) from a
damaged one (a flipped bit in an acknowledged copy: reported by a warning at open and by check()), so a
destroyed stream never comes back silently and the stream published last is never dropped silently."""
import warnings

import numpy as np
import pytest

from gpuio.streams import StreamStoreCorrupt, StreamStoreWarning
from gpuio.streams.format import DAMAGED, EMPTY, TORN, VALID, Superblock, page_pack, page_unpack
from streams_util import open_small

BB = 4096


def _slots(path, page=0):
    """(state, seq) of both copies of a table page, and the superblock."""
    raw = np.fromfile(path, dtype=np.uint8, count=BB * 8)
    sb = Superblock.unpack(raw[:BB])
    out = []
    for slot in (0, 1):
        b = sb.slot_block(page, slot)
        state, seq, _ = page_unpack(raw[b * BB:(b + 1) * BB], page, sb.uuid)
        out.append((state, seq))
    return sb, out


def _newest_block(path):
    sb, slots = _slots(path)
    slot = max((0, 1), key=lambda s: slots[s][1] if slots[s][0] == VALID else -1)
    return sb.slot_block(0, slot), slots[slot][1]


def _flip(path, offset, bit=0):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([b ^ (1 << bit)]))


def _destroyed_store(tmp_path):
    """A store where stream 0 was published and then destroyed: the newest table copy says 'gone'."""
    p = tmp_path / "s.bin"
    with open_small(p) as st:
        sd = st.create_stream()
        st.write_stream(sd, np.arange(100))
        st.close_stream(sd)
        st.destroy_stream(sd.stream_id)
        assert st.streams() == []
    return str(p)


@pytest.mark.parametrize("where", ["head stamp", "entries", "tail stamp", "head seq"])
def test_flipped_bit_in_newest_copy_is_reported(tmp_path, where):
    p = _destroyed_store(tmp_path)
    block, seq = _newest_block(p)
    off = {"head stamp": 2, "entries": 32, "tail stamp": BB - 5, "head seq": 8}[where]
    _flip(p, block * BB + off, bit=3)
    assert _slots(p)[1][block - 1][0] == DAMAGED
    with pytest.warns(StreamStoreWarning, match=r"stream table page 0 .*fails its CRC"):
        st = open_small(p)
    with st:
        with pytest.raises(StreamStoreCorrupt, match=r"page 0 \(stream ids 0\.\.503\).*slot"):
            st.check()


def test_published_last_stream_not_dropped_silently(tmp_path):
    p = tmp_path / "s.bin"
    with open_small(p) as st:
        for _ in range(2):
            sd = st.create_stream()
            st.write_stream(sd, b"x" * 100)
            st.close_stream(sd)
        assert st.streams() == [0, 1]
    block, _ = _newest_block(str(p))
    _flip(str(p), block * BB + 40)  # inside the entries of the copy that published stream 1
    with pytest.warns(StreamStoreWarning, match="page 0"):
        st = open_small(p)
    with st:
        assert st.streams() == [0]  # the older copy: stream 1 is missing, and we said so
        with pytest.raises(StreamStoreCorrupt):
            st.check()


def test_torn_newest_copy_falls_back_silently(tmp_path):
    p = _destroyed_store(tmp_path)
    sb, slots = _slots(p)
    old_slot = min((0, 1), key=lambda s: slots[s][1])
    seq = max(s[1] for s in slots)
    # A crash while writing the next version (seq + 1) over the older slot: only its first 512 B sector
    # reached the device. The write was never acknowledged, so the newest complete copy is the truth.
    image = np.zeros(BB, dtype=np.uint8)
    entries = np.zeros((BB - 64) // 8, dtype=np.uint64)
    entries[5] = 12345
    page_pack(image, 0, seq + 1, sb.uuid, entries)
    with open(p, "r+b") as f:
        f.seek(sb.slot_block(0, old_slot) * BB)
        f.write(image[:512].tobytes())
    assert _slots(p)[1][old_slot][0] == TORN
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with open_small(p) as st:
            assert st.streams() == []  # the destroyed stream stays destroyed
            st.check()
    # The same torn prefix over a never-written slot (a fresh page's second copy) is torn too, not damage.
    head = np.zeros(BB, dtype=np.uint8)
    head[:512] = image[:512]
    assert page_unpack(head, 0, sb.uuid)[0] == TORN
    assert page_unpack(np.zeros(BB, dtype=np.uint8), 0, sb.uuid)[0] == EMPTY


def test_damaged_older_copy_is_harmless(tmp_path):
    p = _destroyed_store(tmp_path)
    sb, slots = _slots(p)
    old_slot = min((0, 1), key=lambda s: slots[s][1])
    _flip(p, sb.slot_block(0, old_slot) * BB + 64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with open_small(p) as st:
            assert st.streams() == []
            st.check()
