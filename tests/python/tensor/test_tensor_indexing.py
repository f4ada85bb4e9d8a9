"""TensorFile's torch-like indexing (tf[idx], tf[idx] = rows, len) and its create/open rules.

Every read is checked against the same index applied to an in-memory torch tensor holding the same rows.
"""
import errno

import numpy as np
import pytest
import torch

from gpuio.tensor import TensorFile

# (shape, why): rows packed several per 4 KiB block / exactly one block per row (read in place).
SHAPES = [((37, 3, 5), "packed rows"), ((9, 1024), "one 4 KiB block per row")]


@pytest.fixture(params=SHAPES, ids=[why for _, why in SHAPES])
def table(tmp_path, request):
    shape, _ = request.param
    ref = torch.randn(shape, generator=torch.Generator().manual_seed(1))
    tf = TensorFile.create(tmp_path / "t.npy", shape, "float32")
    tf.scatter(torch.arange(shape[0]), ref)
    yield tf, ref
    tf.close()


def keys(n, dim):
    deep = [(slice(0, 4), slice(None), 0)] if dim == 3 else [(slice(0, 4), -2)]
    return deep + [0, n - 1, -1, -n, np.int64(2), torch.tensor(3), slice(None), slice(1, None, 2),
            slice(-4, None), slice(2, 100), slice(5, 2), torch.tensor([1, -2, 1, 0]), [2, 2, -1], [],
            np.array([[0, 1], [4, -3]]),
            torch.tensor([[[1], [2]], [[0], [n - 1]]]), torch.arange(n) % 3 == 1, range(1, 4),
            torch.tensor([], dtype=torch.long), (torch.tensor([0, 2]), 1),
            (2, ..., -1), (torch.tensor([[1, 2]]), None)]


def test_reads_match_torch_indexing(table):
    tf, ref = table
    assert len(tf) == ref.shape[0]
    for key in keys(ref.shape[0], ref.dim()):
        want, got = ref[key], tf[key]
        assert got.shape == want.shape, (key, got.shape, want.shape)
        assert torch.equal(got, want), key


def test_writes_match_torch_assignment(table):
    tf, ref = table
    ref = ref.clone()
    n, row = ref.shape[0], ref.shape[1:]
    g = torch.Generator().manual_seed(2)
    for key, value in [(1, torch.randn(row, generator=g)), (-1, 0.5),
                       (slice(0, n, 3), torch.randn((len(range(0, n, 3)), *row), generator=g)),
                       (torch.tensor([[2, 0], [4, 5]]), torch.randn((2, 2, *row), generator=g)),
                       (torch.arange(n) % 4 == 0, torch.randn(row, generator=g)),  # broadcast over rows
                       ([3], np.ones((1, *row), np.float32))]:
        tf[key] = value
        ref[key] = torch.as_tensor(value, dtype=ref.dtype)
        assert torch.equal(tf[:], ref), key
    np.testing.assert_array_equal(np.load(tf.path, mmap_mode="r"), ref.numpy())  # on disk, not cached


def test_bad_indices_raise_typed_errors(table):
    tf, ref = table
    n = ref.shape[0]
    for key in (n, -n - 1, torch.tensor([0, n]), [-n - 1]):
        with pytest.raises(IndexError, match="out of range"):
            tf[key]
    with pytest.raises(TypeError, match="float32"):
        tf[torch.tensor([0.0, 1.0])]
    with pytest.raises(TypeError, match="row index"):
        tf["a"]
    with pytest.raises(ValueError, match="step must be positive"):
        tf[::-1]
    with pytest.raises(IndexError, match="bool row mask"):
        tf[torch.ones(n + 1, dtype=torch.bool)]
    with pytest.raises(TypeError, match="first item must pick rows"):
        tf[..., 0]
    with pytest.raises(TypeError, match="whole rows"):
        tf[0, 1] = 1.0
    with pytest.raises(ValueError, match="do not fit rows"):
        tf[0:2] = torch.zeros(3, *ref.shape[1:])


def test_read_only_file_refuses_assignment(tmp_path):
    TensorFile.create(tmp_path / "r.npy", (4, 4), "float32").close()
    with TensorFile.open(tmp_path / "r.npy") as ro:
        assert torch.equal(ro[1:3], torch.zeros(2, 4))
        with pytest.raises(ValueError, match="read-only"):
            ro[0] = 1.0


def test_direct_construction_names_open_and_create(tmp_path):
    with pytest.raises(TypeError, match=r"TensorFile\.open.*TensorFile\.create"):
        TensorFile(tmp_path / "x.npy")


def test_create_never_replaces_an_existing_file_unless_told(tmp_path):
    path = tmp_path / "user.bin"
    user = np.zeros(4096 + 8192, np.uint8)  # 4 KiB of zeros then data: must not be taken as blank
    user[4096:] = 7
    user.tofile(path)
    with pytest.raises(FileExistsError, match="overwrite=True") as exc:
        TensorFile.create(path, (10, 4), "float32")
    assert exc.value.errno == errno.EEXIST and exc.value.filename == str(path)
    assert str(path) in str(exc.value)
    np.testing.assert_array_equal(np.fromfile(path, np.uint8), user)  # untouched
    with TensorFile.create(path, (10, 4), "float32", overwrite=True) as tf:
        assert torch.equal(tf[:], torch.zeros(10, 4))
    empty = tmp_path / "empty.npy"
    empty.touch()  # an existing empty file holds nothing to lose
    TensorFile.create(empty, (2, 2), "float32").close()
    assert np.load(empty).shape == (2, 2)
