"""tf[i] (a Dataset's __getitem__) reads its row on the calling thread through Engine.read's inline path. The row
must be np.load's row for rows inside a block, rows spanning blocks and whole-block rows, every dtype view, negative
ids, and on a writable file the row a scatter last wrote."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gpuio import TensorFile


@pytest.mark.parametrize("cols,dtype", [(128, "float32"), (1500, "float32"), (1024, "float32"), (7, "int16"),
                                        (64, "bfloat16")])
def test_one_row_is_the_files_row(tmp_path, cols, dtype):
    path = tmp_path / "t.npy"
    n = 97
    tf = TensorFile.create(path, (n, cols), dtype)
    vals = torch.randn(n, cols).to(getattr(torch, dtype)) if dtype != "int16" else \
        torch.randint(-1000, 1000, (n, cols), dtype=torch.int16)
    tf.scatter(torch.arange(n), vals)
    tf.close()
    with TensorFile.open(path) as tf:
        for i in (0, 1, 50, n - 1, -1, -n):
            got = tf[i]
            assert got.dtype == vals.dtype and tuple(got.shape) == (cols,)
            assert torch.equal(got, vals[i]), i
        assert tf.stats()["engine"]["inline_ops"] > 0
        with pytest.raises(IndexError):
            tf[n]


def test_one_row_of_a_writable_file_sees_the_last_scatter(tmp_path):
    tf = TensorFile.create(tmp_path / "w.npy", (40, 100), "float32")
    try:
        for k in range(3):
            tf[7] = torch.full((100,), float(k))
            assert torch.equal(tf[7], torch.full((100,), float(k)))
        assert torch.equal(tf[8], torch.zeros(100))  # the neighbour in the same block untouched
    finally:
        tf.close()


def test_engine_gpu_path_keeps_its_old_name_for_a_release(tmp_path):
    tf = TensorFile.create(tmp_path / "g.npy", (4, 4), "float32")
    try:
        with pytest.warns(DeprecationWarning, match="engine_gpu_path"):
            tf.gpu_direct = False
        assert tf.engine_gpu_path is False
        with pytest.warns(DeprecationWarning):
            assert tf.gpu_direct is False
    finally:
        tf.close()
