"""One id check (gpuio._index.check_ids) behind every id argument: engine block ids, TensorFile row ids, the
cache's row sources and PyG's feature store. Floats (even 1.0, NaN) and bools are refused by name."""
import numpy as np
import pytest
import torch

import gpuio
from gpuio._index import check_ids
from gpuio.rows import InMemoryRows


@pytest.fixture
def tf(tmp_path):
    t = gpuio.TensorFile.create(str(tmp_path / "t.npy"), (8, 4), "float32")
    t.scatter(torch.arange(8), torch.arange(32, dtype=torch.float32).view(8, 4))
    yield t
    t.close()


@pytest.mark.parametrize("bad, text", [
    ([1.5], "got 1.5 at position 0"),
    ([0, 0.5], "got 0.5 at position 1"),
    ([1.9], "got 1.9 at position 0"),
    ([1.0], "got 1.0 at position 0"),
    ([float("nan")], "got nan at position 0"),
    ([True], "(not bool), got True"),
    (np.array([0.5]), "dtype float64"),
    (np.array([True]), "dtype bool"),
    (torch.tensor([1.5]), "dtype torch.float32"),
    (torch.tensor([True]), "dtype torch.bool"),
    ("12", "got str '12'"),
    (1.5, "got float 1.5"),
])
def test_tensorfile_gather_refuses_non_integers(tf, bad, text):
    with pytest.raises(TypeError) as e:
        tf.gather(bad)
    assert "row ids" in str(e.value) and text in str(e.value)


def test_engine_read_refuses_float_block_ids(tmp_path):
    p = str(tmp_path / "d.bin")
    gpuio.Engine.create_file(p, 1 << 20)
    with gpuio.Engine(p) as e:
        buf = np.empty(4096, np.uint8)
        for bad in ([1.5], [True], (0.0,)):
            with pytest.raises(TypeError, match="blocks must hold integers"):
                e.read(bad, buf)
        with pytest.raises(TypeError, match="src must|blocks must hold integers"):
            e.write([2.0], buf)
        e.read([1], buf)  # ints, NumPy integer scalars, ranges are ids
        e.read([np.int32(1)], buf)
        e.read(range(1, 2), buf)


def test_integers_of_every_kind_are_ids(tf):
    want = tf.gather(torch.tensor([1, 7]))
    for ok in ([1, 7], (1, 7), np.array([1, 7], np.uint8), np.array([1, 7], np.int32),
               torch.tensor([1, 7], dtype=torch.int16), [np.int64(1), np.uint16(7)]):
        assert torch.equal(tf.gather(ok), want)
    assert tf.gather(3).shape == (1, 4)  # a scalar id is one row
    assert tf.gather([]).shape == (0, 4)


def test_range_errors_name_bounds(tf):
    with pytest.raises(IndexError, match=r"row ids must lie in \[0, 8\), got min 0, max 8"):
        tf.gather([0, 8])
    with pytest.raises(IndexError, match="got min -1"):
        tf.gather([-1])
    with pytest.raises(IndexError, match="outside int64"):
        tf.gather([2 ** 70])
    with pytest.raises(IndexError, match="above the largest id"):
        tf.gather(np.array([2 ** 63], dtype=np.uint64))


def test_scatter_refuses_float_ids(tf):
    with pytest.raises(TypeError, match="got 0.5"):
        tf.scatter([0.5], torch.zeros(1, 4))


def test_row_tables_and_pyg_use_the_same_check():
    rows = InMemoryRows(torch.arange(12.0).view(6, 2))
    with pytest.raises(TypeError, match="got 1.5"):
        rows.gather([1.5])
    assert torch.equal(rows.gather([5]), torch.tensor([[10.0, 11.0]]))
    # PyG indices follow torch's rules (negative ids, bool masks: gpuio.tensor.row_ids), floats refused alike
    from gpuio.tensor import row_ids
    with pytest.raises(TypeError, match="must hold integers"):
        row_ids([0.5], 6)
    assert row_ids(slice(1, 3), 6)[0].tolist() == [1, 2]


def test_check_ids_contract():
    assert check_ids([3, 1], "x").dtype == np.int64
    assert check_ids(torch.tensor([3], dtype=torch.int32), "x").dtype == torch.int64
    assert check_ids([[1, 2], [3, 4]], "x").shape == (2, 2)  # shape kept; callers flatten or refuse
    with pytest.raises(TypeError, match="x must hold integers"):
        check_ids([1, None], "x")
    with pytest.raises(TypeError, match="x must hold integers"):
        check_ids(np.array([1, 2.5], dtype=object), "x")


@pytest.mark.parametrize("n", [1, 64, 65, 1000])
def test_short_and_long_id_arrays_get_the_same_range_check(n):
    # ids up to _index._SHORT are checked through a Python list (a one-block read's latency), longer ones by NumPy:
    # both name the same bounds.
    ids = np.arange(n, dtype=np.int64)
    assert check_ids(ids, "ids", upper=n) is ids
    bad = ids.copy()
    bad[-1] = n
    with pytest.raises(IndexError, match=rf"ids must lie in \[0, {n}\), got min {int(bad.min())}, max {n}$"):
        check_ids(bad, "ids", upper=n)
    bad[-1] = -3
    with pytest.raises(IndexError, match=rf"ids must lie in >= 0, got min -3, max {int(bad.max())}$"):
        check_ids(bad, "ids")
    two_d = np.arange(n, dtype=np.uint32).reshape(1, n)
    assert check_ids(two_d, "ids").dtype == np.int64
