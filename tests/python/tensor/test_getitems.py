"""A DataLoader with batch_size over a TensorFile (or a Dataset that forwards to it, as the loader-workers guide's
does) fetches each batch through TensorFile.__getitems__: one gather a batch, not one tf[i] a row. The batches must
be np.load's rows for the sampled ids, in workers too, and the file's counters must show one gather per batch."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Subset

from gpuio import TensorFile

N, COLS, BATCH = 300, 24, 64


@pytest.fixture
def table(tmp_path):
    tf = TensorFile.create(tmp_path / "rows.npy", (N, COLS), "float32")
    tf[:] = torch.arange(N * COLS, dtype=torch.float32).reshape(N, COLS)
    tf.close()
    with TensorFile.open(tmp_path / "rows.npy") as tf:
        yield tf


def _expected(tf, ids) -> torch.Tensor:
    return torch.from_numpy(np.load(tf.path)[np.asarray(ids)])


def test_getitems_is_one_gather_of_the_ids(table):
    ids = [5, 0, 299, 5, 17]
    before = table.stats()["gathers"]
    rows = table.__getitems__(ids)
    assert isinstance(rows, list) and len(rows) == len(ids)
    assert torch.equal(torch.stack(rows), _expected(table, ids))
    assert table.stats()["gathers"] - before == 1
    assert table.__getitems__([]) == []
    with pytest.raises(IndexError):
        table.__getitems__([0, N])


def test_dataloader_batches_are_one_gather_each(table):
    order = torch.randperm(N, generator=torch.Generator().manual_seed(3)).tolist()
    loader = DataLoader(table, batch_size=BATCH, sampler=order)  # a shuffled epoch, in an order known here
    before = table.stats()["gathers"]
    got = list(loader)
    assert len(got) == -(-N // BATCH)
    assert table.stats()["gathers"] - before == len(got)
    assert torch.equal(torch.cat(got), _expected(table, order))


def test_subset_forwards_to_getitems(table):
    sub = Subset(table, list(range(10, 200, 3)))
    before = table.stats()["gathers"]
    got = torch.cat(list(DataLoader(sub, batch_size=16)))
    assert table.stats()["gathers"] - before == -(-len(sub) // 16)
    assert torch.equal(got, _expected(table, list(range(10, 200, 3))))


def test_workers_fetch_whole_batches(table):
    loader = DataLoader(table, batch_size=BATCH, num_workers=2, multiprocessing_context="spawn", timeout=120)
    assert torch.equal(torch.cat(list(loader)), _expected(table, range(N)))
