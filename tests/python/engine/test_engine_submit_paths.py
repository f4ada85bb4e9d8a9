"""Engine._submit's shortcuts for the one-block latency path: int64 NumPy ids and a one-element list
of an int skip the generic id checks whatever the destination is; everything else still goes through them.
The same data and the same one-line errors either way (CPU: host memory, NumPy and CPU tensors)."""
import numpy as np
import pytest

import gpuio
from gpuio import _buffers

torch = pytest.importorskip("torch")
BS = 4096


@pytest.fixture(scope="module")
def eng(tmp_path_factory):
    path = tmp_path_factory.mktemp("submit") / "d.bin"
    data = np.random.default_rng(5).integers(0, 256, size=(64, BS), dtype=np.uint8)
    path.write_bytes(data.tobytes())
    with gpuio.Engine(str(path), workers=1, direct=False) as e:
        e.data = data
        yield e


@pytest.mark.parametrize("ids", [np.array([9], dtype=np.int64), [9], np.array([9], dtype=np.int32), (9,),
                                 torch.tensor([9]), np.array([[9]], dtype=np.int64)[0]])
@pytest.mark.parametrize("dest", ["numpy", "tensor"])
def test_one_block_reads_land_whatever_the_id_form(eng, ids, dest):
    out = np.zeros((1, BS), np.uint8) if dest == "numpy" else torch.zeros((1, BS), dtype=torch.uint8)
    assert eng.read(ids, out) is out
    got = out if dest == "numpy" else out.numpy()
    assert np.array_equal(got, eng.data[[9]])


def test_fast_path_ids_keep_the_engine_range_check(eng):
    out = np.zeros((1, BS), np.uint8)
    with pytest.raises(IndexError, match="64"):
        eng.read(np.array([64], dtype=np.int64), torch.zeros((1, BS), dtype=torch.uint8))
    with pytest.raises(IndexError, match="64"):
        eng.read([64], out)
    with pytest.raises(IndexError, match="-1"):  # negative: not the shortcut; the generic check names it
        eng.read([-1], out)
    with pytest.raises(TypeError, match="bool"):  # a bool is an int subclass, never an id
        eng.read([True], out)
    with pytest.raises(TypeError, match="float"):
        eng.read([1.0], out)
    with pytest.raises(IndexError, match="outside int64"):  # above int64: not the shortcut either
        eng.read([1 << 64], out)


def test_non_contiguous_int64_ids_take_the_generic_path(eng):
    ids = np.array([3, 0, 5, 0], dtype=np.int64)[::2]  # not contiguous: copied, not refused
    out = torch.zeros((2, BS), dtype=torch.uint8)
    eng.read(ids, out)
    assert np.array_equal(out.numpy(), eng.data[[3, 5]])


def test_cuda_device_of_host_arrays():
    assert _buffers.cuda_device(np.zeros(3)) == -1
    assert _buffers.cuda_device(torch.zeros(3)) == -1
    assert _buffers.cuda_device(bytearray(3)) == -1
    assert _buffers.cuda_device([1, 2]) == -1
