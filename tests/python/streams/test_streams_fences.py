"""Reader fences (the CUDA read path's slot protection), tested on the CPU with deferred copies: each
chunk is only *referenced* when consumed and copied out when its fence is synchronized, as a DMA queued on
a CUDA stream would read it. A slot refilled before its fence passed would hand back the wrong bytes."""
from __future__ import annotations

import numpy as np
import pytest

from gpuio.streams import serializer
from streams_util import SMALL, open_small


class DeferredCopies:
    """A fence whose work is the copies queued since the previous fence; done only once synchronized
    (or, with ``done_after``, after that many query() calls: the copy engine finishing on its own)."""

    def __init__(self, pending: list, done_after: int | None):
        self.pending, self.done_after, self.queries, self.done = pending, done_after, 0, False

    def query(self) -> bool:
        self.queries += 1
        if self.done_after is not None and self.queries >= self.done_after:
            self.synchronize()
        return self.done

    def synchronize(self) -> None:
        for dst, chunk in self.pending:
            dst[:] = chunk
        self.pending.clear()
        self.done = True


@pytest.mark.parametrize("done_after", [None, 1, 3])
def test_slots_are_not_refilled_before_their_fence(tmp_path, done_after):
    payload = np.random.default_rng(1).integers(0, 255, size=SMALL["sblock_bytes"] * 9 + 123, dtype=np.uint8)
    with open_small(tmp_path / "s.bin", create_bytes=8 << 20) as st:
        sd = st.create_stream()
        st.write_stream(sd, payload.tobytes())
        st.close_stream(sd)
        rd = st.open_stream(sd.stream_id)
        r = rd._io
        magic, kind, _, meta_len, n = serializer._HDR.unpack(r.read_bytes(serializer.HEADER_BYTES))
        assert kind == serializer.KIND_BYTES and n == payload.size
        r.read_bytes(meta_len)
        out = np.zeros_like(payload)
        fences = []

        def put(chunk, offset):
            fences.append(DeferredCopies([(out[offset:offset + chunk.size], chunk)], done_after))
            r.fence(fences[-1])

        r.consume(n, put)
        assert st.read_stream(rd) is None
        st.close_stream(rd)  # synchronizes what is still pending before the slots go back
    assert all(f.done for f in fences)
    assert np.array_equal(out, payload)
