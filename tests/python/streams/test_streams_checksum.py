"""Stream payloads carry a CRC-32C by default: a flipped bit in a payload is an error naming the
stream and sblock, not a wrong tensor. The C++ CRC-32C matches the definition."""
import numpy as np
import pytest

from gpuio import _core
from gpuio.streams import DEFAULTS, StreamStoreCorrupt
from streams_util import open_small


def crc32c_reference(data: bytes, crc: int = 0) -> int:
    c = ~crc & 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
    return ~c & 0xFFFFFFFF


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 8191, 3 * 8192 - 1, 3 * 8192, 3 * 8192 + 13, 2 * 3 * 8192 + 5])
def test_crc32c_matches_definition(n):
    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
    got = _core.crc32c(data)
    assert got == crc32c_reference(data.tobytes())  # sizes past 3 x 8 KiB take the interleaved SSE4.2 path
    k = n // 3
    assert _core.crc32c(data[k:], _core.crc32c(data[:k])) == got  # continues a running value
    assert _core.crc32c(np.frombuffer(b"123456789", np.uint8)) == 0xE3069283


def test_payload_checksums_are_on_by_default_and_catch_a_flipped_bit(tmp_path):
    assert DEFAULTS["checksum_payload"] is True
    p = tmp_path / "s.bin"
    data = np.arange(5000, dtype=np.int64)
    with open_small(p) as st:
        sd = st.create_stream()
        st.write_stream(sd, data)
        st.close_stream(sd)
        start, _ = st.stream_blocks(sd.stream_id)[0]
        bb = st.block_bytes
    with open(p, "r+b") as f:  # one bit of the payload, well inside the array's bytes
        f.seek(start * bb + 2000)
        v = f.read(1)[0]
        f.seek(start * bb + 2000)
        f.write(bytes([v ^ 4]))
    with open_small(p) as st:
        st.check()  # metadata is intact: only the payload changed
        rd = st.open_stream(sd.stream_id)
        with pytest.raises(StreamStoreCorrupt, match=r"stream 0: sblock 0 at block \d+ fails its payload CRC-32C"):
            st.read_stream(rd)
        st.close_stream(rd)


def test_unchecksummed_streams_still_read(tmp_path):
    with open_small(tmp_path / "s.bin", checksum_payload=False) as st:
        sd = st.create_stream()
        st.write_stream(sd, b"abc")
        st.close_stream(sd)
        rd = st.open_stream(sd.stream_id)
        assert st.read_stream(rd) == b"abc"
        st.close_stream(rd)
