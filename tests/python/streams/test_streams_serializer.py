"""Serializer: raw arrays/tensors without intermediate copies, pickle 5 with out-of-band buffers, devices."""
from __future__ import annotations

import numpy as np
import pytest

from gpuio.streams import serializer
from streams_util import open_small, read_all, write_all

torch = pytest.importorskip("torch")


def test_arrays_are_not_copied_before_the_stream_buffer():
    a = np.arange(1 << 16, dtype=np.float64)
    header, segs = serializer.encode(a)
    assert len(segs) == 1 and np.shares_memory(segs[0].array, a)
    t = torch.arange(1000, dtype=torch.float32)
    _, segs = serializer.encode(t)
    assert segs[0].flat.data_ptr() == t.data_ptr()
    # a dict of arrays: the arrays travel out of band, as views of their own memory
    obj = {"x": a, "y": [a[:10].copy()]}
    header, segs = serializer.encode(obj)
    assert any(np.shares_memory(s.array, a) for s in segs[1:])
    body = segs[0].nbytes
    assert body < 1000, f"pickle body of {body} B: the array went in band"


def test_tensors_round_trip(tmp_path):
    objs = [torch.randn(3, 5), torch.arange(10, dtype=torch.int16)[::3], torch.tensor(3.5),
            torch.ones(4, 4, dtype=torch.bfloat16), torch.zeros(0, 2), torch.tensor([True, False]),
            torch.randn(70000)]  # spans several 16 KiB sblocks
    with open_small(tmp_path / "s.bin") as st:
        sid = write_all(st, objs)
        back = read_all(st, sid)
        for a, b in zip(objs, back):
            assert isinstance(b, torch.Tensor) and b.dtype == a.dtype and b.shape == a.shape
            assert torch.equal(a, b)
        rd = st.open_stream(sid)
        assert st.read_stream(rd, device="cpu").device.type == "cpu"
        st.close_stream(rd)


def test_pickle_out_of_band_round_trip(tmp_path):
    a = np.random.default_rng(0).random((300, 70))
    obj = {"w": a, "name": "layer", "list": [1, 2.5, None], "t": torch.arange(5)}
    with open_small(tmp_path / "s.bin") as st:
        sd = st.create_stream()
        st.write_stream(sd, obj)
        st.close_stream(sd)
        (back,) = read_all(st, sd.stream_id)
        assert np.array_equal(back["w"], a) and back["w"].flags.writeable
        assert back["name"] == "layer" and back["list"] == [1, 2.5, None] and torch.equal(back["t"], obj["t"])


def test_ndarray_to_torch_device(tmp_path):
    with open_small(tmp_path / "s.bin") as st:
        sd = st.create_stream()
        st.write_stream(sd, np.arange(6.0))
        st.close_stream(sd)
        rd = st.open_stream(sd.stream_id)
        t = st.read_stream(rd, device="cpu")
        st.close_stream(rd)
        assert isinstance(t, torch.Tensor) and torch.equal(t, torch.arange(6.0, dtype=torch.float64))
