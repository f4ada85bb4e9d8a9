"""Datasets and helpers for the tests that hand gpuio objects to other processes (DataLoader workers under every
start method, torch.multiprocessing.spawn, os.fork). Module-level so that spawned children can import them."""
from __future__ import annotations

import os
import signal

import torch

ROWS, COLS = 96, 40  # a row of 160 bytes: rows straddle 4 KiB blocks, so a misplaced block shows


def expected_rows(ids) -> torch.Tensor:
    """The values test tables hold: row r is r * 1000 + column."""
    ids = torch.as_tensor(ids, dtype=torch.float64)
    return (ids[:, None] * 1000 + torch.arange(COLS, dtype=torch.float64)).to(torch.float32)


def make_table(path):
    import gpuio

    tf = gpuio.TensorFile.create(path, (ROWS, COLS), "float32", overwrite=True)
    tf[:] = expected_rows(range(ROWS))
    return tf


class RowsDataset(torch.utils.data.Dataset):
    """Item i: (i, rows of the table at a few ids around i) read by the worker through the table it received."""

    def __init__(self, table):
        self.table = table

    def __len__(self):
        return ROWS

    def __getitem__(self, i):
        ids = torch.tensor([i, (i * 7) % ROWS, (i + 1) % ROWS])
        return ids, self.table[ids], os.getpid()


def check_loader(loader) -> set:
    """Every item of the loader equals the table's values; returns the pids that produced them."""
    pids, seen = set(), 0
    for ids, rows, pid in loader:
        for b in range(ids.shape[0]):
            torch.testing.assert_close(rows[b], expected_rows(ids[b]), rtol=0, atol=0)
            seen += 1
        pids.update(int(p) for p in pid)
    assert seen == ROWS
    return pids


def spawned_rank(rank: int, table, out_dir: str) -> None:
    """torch.multiprocessing.spawn's target: read every row through the table received, record the verdict."""
    got = table[torch.arange(ROWS)]
    ok = torch.equal(got, expected_rows(range(ROWS)))
    with open(os.path.join(out_dir, f"rank{rank}"), "w") as f:
        f.write("ok" if ok else "bad")


def fork_and_wait(child, timeout_s: int = 30) -> int:
    """Run child() in a forked child process (bounded by an alarm) and return its exit code."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        signal.alarm(timeout_s)
        code = 1
        try:
            code = child()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), f"the child died ({status}): hung past its {timeout_s} s alarm?"
    return os.WEXITSTATUS(status)
