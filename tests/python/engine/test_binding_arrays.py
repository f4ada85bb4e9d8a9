"""Arrays cross into C++ as nb::ndarray (cpp/src/bindings/arrays.hpp): the binding, not Python, refuses a wrong
dtype, shape, strides, read-only destination or byte count, in one line naming the argument. Both the raw
binding (gpuio._core.EngineCore.submit) and gpuio.Engine are checked; sources may be any buffer (bytes,
bytearray, memoryview, NumPy, torch), and the binding keeps what it was given alive while the batch runs."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import gpuio
from gpuio import _core

BS = 4096
READ, WRITE = 0, 1


@pytest.fixture
def eng(tmp_path):
    path = tmp_path / "dev.bin"
    gpuio.Engine.create_file(path, 64 * BS)
    with gpuio.Engine(path, block_size=BS, writable=True, direct=False) as e:
        yield e


def one_line(excinfo) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg, msg  # no nanobind overload listing
    return msg


@pytest.mark.parametrize("blocks, err, text", [
    (np.arange(2, dtype=np.int32), TypeError, "blocks must be int64, got int32"),
    (np.arange(2, dtype=np.float64), TypeError, "blocks must be int64, got float64"),
    (np.arange(4, dtype=np.int64).reshape(2, 2), ValueError, r"blocks must be 1-D, got shape \(2, 2\)"),
    (np.arange(4, dtype=np.int64)[::2], ValueError, r"blocks must be contiguous, got shape \(2,\) with strides \(2,\)"),
    ([0, 1], TypeError, "blocks must be a NumPy array, a tensor or a buffer .* got list"),
])
def test_binding_refuses_bad_ids(eng, blocks, err, text):
    with pytest.raises(err, match=text) as ei:
        eng._core.submit(READ, blocks, np.empty(2 * BS, np.uint8))
    one_line(ei)


def test_binding_refuses_bad_buffers(eng):
    ids = np.arange(2, dtype=np.int64)
    cases = [
        (np.empty(2 * BS - 1, np.uint8), ValueError, r"out holds 8191 bytes, expected 8192 \(len\(blocks\) \* block_size\)"),
        (np.empty(2 * BS + 8, np.uint8), ValueError, "out holds 8200 bytes, expected 8192"),
        (np.empty(4 * BS, np.uint8)[::2], ValueError, r"out must be contiguous, got shape \(8192,\) with strides \(2,\)"),
        (np.empty((BS, 4), np.uint8)[:, :2], ValueError, "out must be contiguous"),
        (bytes(2 * BS), ValueError, r"out is read-only \(bytes\); a read needs a writable buffer"),
        (np.empty(2, dtype=object), TypeError, "out .*dtype object.* exports neither DLPack nor a buffer"),
        ("text", TypeError, "out must be a NumPy array, a tensor or a buffer .* got str"),
    ]
    for buf, err, text in cases:
        with pytest.raises(err, match=text) as ei:
            eng._core.submit(READ, ids, buf)
        one_line(ei)
    ro = np.zeros(2 * BS, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"out is read-only \(ndarray\)"):
        eng._core.submit(READ, ids, ro)
    with pytest.raises(ValueError, match="src holds 4096 bytes, expected 8192"):
        eng._core.submit(WRITE, ids, ro[:BS])
    eng._core.submit(WRITE, ids, ro).wait()  # read-only memory is a fine source


def test_engine_surfaces_the_binding_errors(eng):
    # gpuio.Engine converts ids (any integer dtype, lists) but leaves buffers to the binding
    with pytest.raises(ValueError, match="out holds 100 bytes, expected 8192"):
        eng.read([0, 1], np.empty(100, np.uint8))
    with pytest.raises(ValueError, match="out must be contiguous"):
        eng.read(np.arange(2, dtype=np.int32), np.empty(4 * BS, np.uint8)[::2])
    with pytest.raises(ValueError, match=r"blocks must be 1-D, got shape \(1, 2\)"):
        eng.read([[0, 1]], np.empty(2 * BS, np.uint8))


def test_buffer_protocol_sources_and_destinations(eng):
    data = np.random.default_rng(1).integers(0, 256, 3 * BS, dtype=np.uint8)
    ids = np.array([5, 2, 9])
    eng.write(ids, data.tobytes())  # bytes: read-only, a source
    got = bytearray(3 * BS)
    eng.read(ids, got)  # bytearray: writable
    assert bytes(got) == data.tobytes()
    view = memoryview(bytearray(3 * BS))
    eng.read(ids, view)
    assert view.tobytes() == data.tobytes()
    eng.write(ids, memoryview(data.tobytes()))  # a read-only memoryview as a source
    words = np.empty(3 * BS // 8, np.float64)  # any dtype: bytes are bytes
    eng.read(ids, words)
    assert words.tobytes() == data.tobytes()


def test_torch_arrives_through_dlpack(eng):
    torch = pytest.importorskip("torch")
    w = torch.nn.Parameter(torch.randn(2 * BS // 4))  # requires grad: detached, memory shared
    eng.write(torch.tensor([7, 8]), w)
    out = torch.empty(2 * BS, dtype=torch.uint8)
    eng.read(torch.tensor([7, 8], dtype=torch.int16), out)
    assert torch.equal(out.view(torch.float32), w.detach())
    with pytest.raises(TypeError, match="blocks must be int64, got int32") as ei:
        eng._core.submit(READ, torch.tensor([7, 8], dtype=torch.int32), out)
    one_line(ei)
    with pytest.raises(ValueError, match="out must be contiguous") as ei:
        eng.read([7, 8], torch.empty(2, BS, dtype=torch.uint8).t())
    one_line(ei)


def test_batch_keeps_its_arrays_alive(eng):
    data = np.arange(8 * BS, dtype=np.uint32).view(np.uint8)[: 8 * BS]
    eng.write(np.arange(8), data)
    out = np.empty(8 * BS, np.uint8)
    ids = np.arange(8, dtype=np.int64)
    gone = weakref.ref(ids)
    h = eng._core.submit(READ, ids, out)
    del ids
    gc.collect()
    assert gone() is not None  # the C++ handle holds the ids while the batch may read them
    h.wait()
    assert np.array_equal(out, data)
    del h
    gc.collect()
    assert gone() is None


def test_gpu_bindings_take_arrays_too():
    """Without the CUDA layer these bindings do not exist; with it, their signatures take arrays, not addresses."""
    if not _core.cuda_built:
        assert not hasattr(_core, "gpu_pread_memcpy")
        return
    assert "ids_ptr" not in _core.gpu_pread_memcpy.__doc__
    assert "blocks: object, data: object" in _core.GpuRuntime.stream_submit.__doc__
    assert not hasattr(_core.GpuRuntime, "alloc")
