"""TensorFile: layout, gather/scatter integrity against NumPy, block-exact reads, errors."""
import os

import numpy as np
import pytest
import torch

from gpuio.tensor import TensorFile

SEED = int(os.environ.get("GPUIO_TEST_SEED", "1234"))


@pytest.fixture
def rng():
    print(f"seed={SEED}")
    return np.random.default_rng(SEED)


CASES = [((1000, 37), "float32", 4096),  # rows straddle block boundaries
         ((257, 1024), "float32", 4096),  # exactly one block per row
         ((90, 2, 1024), "float32", 4096),  # two whole blocks per row (read straight into the result)
         ((70, 256), "float64", 512),  # four whole 512 B blocks per row
         ((300, 2000), "float64", 512),  # rows span many small blocks
         ((5000,), "int16", 4096),  # 1-D: 2048 rows per block
         ((64, 3, 5), "uint8", 1024),
         ((100, 16), "bool", 4096)]


@pytest.mark.parametrize("shape,dtype,bs", CASES)
def test_gather_scatter_match_numpy(tmp_path, rng, shape, dtype, bs):
    path = tmp_path / "t.npy"
    ref = (rng.standard_normal(shape) * 100).astype(dtype)
    with TensorFile.create(path, shape, dtype, block_size=bs) as tf:
        tf.scatter(np.arange(shape[0]), ref)
        for n in (0, 1, 7, 500):
            idx = rng.integers(0, shape[0], n)
            if n > 1:
                idx[1] = idx[0]  # duplicates in the batch
            got = tf.gather(torch.from_numpy(idx))
            assert got.dtype == torch.from_numpy(ref[:0]).dtype
            assert tuple(got.shape) == (n, *shape[1:])
            np.testing.assert_array_equal(got.numpy(), ref[idx])
        perm = rng.permutation(shape[0])[:60]  # distinct, unsorted (whole-block rows: read in place)
        np.testing.assert_array_equal(tf.gather(torch.from_numpy(perm)).numpy(), ref[perm])
        # partial rewrite with duplicate ids: the last occurrence wins
        idx = rng.integers(0, shape[0], 50)
        idx[-1] = idx[0]
        vals = (rng.standard_normal((50, *shape[1:])) * 100).astype(dtype)
        tf.scatter(torch.from_numpy(idx), torch.from_numpy(vals))
        ref[idx[:-1]] = vals[:-1]
        ref[idx[-1]] = vals[-1]
        np.testing.assert_array_equal(tf.gather(torch.arange(shape[0])).numpy(), ref)
    loaded = np.load(path, mmap_mode="r")  # still a valid .npy, data at a block boundary
    np.testing.assert_array_equal(loaded, ref)
    assert loaded.offset % max(4096, bs) == 0
    reopened = TensorFile.open(path, block_size=bs)
    np.testing.assert_array_equal(reopened.gather(torch.tensor([shape[0] - 1])).numpy(), ref[-1:])
    reopened.close()


def test_reads_only_blocks_holding_rows(tmp_path):
    with TensorFile.create(tmp_path / "t.npy", (4096, 64), "float32") as tf:  # 16 rows per 4 KiB block
        before = tf.stats()["blocks_read"]
        tf.gather(torch.tensor([0, 1, 15, 15, 3]))  # all in block 0, duplicates
        assert tf.stats()["blocks_read"] - before == 1
        tf.gather(torch.tensor([16, 4095, 100, 17]))  # blocks 1, 255, 6
        assert tf.stats()["blocks_read"] - before == 4
        tf.gather(torch.tensor([], dtype=torch.long))
        assert tf.stats()["blocks_read"] - before == 4
    with TensorFile.create(tmp_path / "u.npy", (100, 1500), "float32") as tf:  # 6000-byte rows
        before = tf.stats()["blocks_read"]
        tf.gather(torch.tensor([1]))  # bytes [6000, 12000): blocks 1 and 2
        assert tf.stats()["blocks_read"] - before == 2


def test_table_policy_is_the_engines(tmp_path):
    """A table's engine workers and request size are the engine's policy (limits.hpp, _core.table_defaults()):
    its engine runs that many workers, and a gather or scatter of more blocks than one request holds is cut
    into requests of at most batch_blocks_max blocks (here one more: two requests)."""
    from gpuio import _core
    policy = _core.table_defaults()
    step = policy["batch_blocks_max"]
    with TensorFile.create(tmp_path / "t.npy", (step + 1, 128), "float32", block_size=512) as tf:  # a row a block
        assert tf.engine.stats()["workers"] == policy["workers"]
        rows = torch.arange(step + 1, dtype=torch.float32)[:, None].expand(-1, 128)
        before = tf.engine.stats()["batches"]
        tf.scatter(torch.arange(step + 1), rows)
        assert tf.engine.stats()["batches"] - before == 2
        before = tf.engine.stats()["batches"]
        assert torch.equal(tf.gather(torch.arange(step + 1)), rows)
        assert tf.engine.stats()["batches"] - before == 2


def test_prefetch_handle(tmp_path, rng):
    ref = rng.standard_normal((200, 10)).astype("float32")
    with TensorFile.create(tmp_path / "t.npy", ref.shape, "float32") as tf:
        tf.scatter(torch.arange(200), torch.from_numpy(ref))
        h = tf.prefetch(torch.tensor([5, 199, 5]))
        got = h.wait()
        assert h.done()
        np.testing.assert_array_equal(got.numpy(), ref[[5, 199, 5]])


def test_bad_input_raises(tmp_path):
    with TensorFile.create(tmp_path / "t.npy", (10, 4), "float32") as tf:
        with pytest.raises(IndexError, match="10"):
            tf.gather(torch.tensor([10]))
        with pytest.raises(IndexError, match="-1"):
            tf.gather(torch.tensor([-1]))
        with pytest.raises(TypeError, match="float"):
            tf.gather(torch.tensor([1.0]))
        with pytest.raises(ValueError, match=r"\(2, 3\)"):
            tf.scatter(torch.tensor([0, 1]), torch.zeros(2, 3))
        with pytest.raises(TypeError, match="complex64"):
            tf.scatter(torch.tensor([0]), torch.zeros(1, 4, dtype=torch.complex64))
    with TensorFile.open(tmp_path / "t.npy") as ro:
        with pytest.raises(ValueError, match="read-only"):
            ro.scatter(torch.tensor([0]), torch.zeros(1, 4))
    np.save(tmp_path / "plain.npy", np.zeros((3, 3), np.float32))
    with pytest.raises(ValueError, match="gpuio import"):
        TensorFile.open(tmp_path / "plain.npy")
    with pytest.raises(ValueError, match="block_size"):
        TensorFile.create(tmp_path / "x.npy", (3, 3), "float32", block_size=1000)
    with pytest.raises(TypeError, match="object"):
        TensorFile.create(tmp_path / "x.npy", (3, 3), object)


@pytest.mark.parametrize("direct_min_bytes", [None, 0])
def test_staged_and_in_place_reads_agree(tmp_path, rng, direct_min_bytes):
    """Short reads through the engine's staging (its default) or O_DIRECT in place: same rows."""
    opts = {} if direct_min_bytes is None else {"direct_min_bytes": direct_min_bytes}
    ref = rng.standard_normal((600, 1024)).astype("float32")  # 4 KiB rows (read in place) ...
    small = rng.standard_normal((4000, 100)).astype("float32")  # ... and packed rows (cut from blocks)
    for name, data in (("a.npy", ref), ("b.npy", small)):
        with TensorFile.create(tmp_path / name, data.shape, "float32", **opts) as tf:
            tf.scatter(np.arange(data.shape[0]), data)
            idx = rng.permutation(data.shape[0])[:300]
            np.testing.assert_array_equal(tf.gather(torch.from_numpy(idx)).numpy(), data[idx])
            path = tf.stats()["engine"]["data_path"]
            if tf.direct:  # the engine says which way the blocks came
                assert ("staging" in path) == (direct_min_bytes is None), path
