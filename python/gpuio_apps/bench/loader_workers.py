"""The parts of the data-loader-workers benchmark (benchmarks/loader_workers.py): a Dataset of batches of random
rows read by gpuio (a TensorFile) or by np.memmap in whichever process runs it, and the timed pass of a torch
DataLoader over it. Module-level, so workers under spawn and forkserver import it.

The table holds row r = [r, 1, 2, ..., cols - 1] (float32), so every row read is checked for its place
(column 0) and its bytes (the rest) without a second copy of the table.
"""
from __future__ import annotations

import os
import time

import numpy as np
import torch

from gpuio.loader import Keys
from gpuio_apps.baselines import MemmapRows
from gpuio.tensor import TensorFile

# The sweep's sources: gpuio, and "memmap": np.memmap advised MADV_RANDOM (a fault reads its page only: the kinder
# mmap baseline out of core). PLAIN: np.memmap as users and DGL's loader open it (a fault reads ahead); out of core
# it runs two to three orders of magnitude slower (H200: 177 rows/s), so it gets batches of PLAIN_ROWS_DIV times
# fewer rows and a short probe of its own.
SOURCES = ("gpuio", "memmap")
PLAIN = "memmap-plain"
PLAIN_ROWS_DIV = 64
WRITE_CHUNK_BYTES = 64 << 20


def expected_rows(ids: torch.Tensor, cols: int) -> torch.Tensor:
    """What the table holds at rows `ids`."""
    out = torch.arange(cols, dtype=torch.float32).repeat(ids.numel(), 1)
    out[:, 0] = ids.to(torch.float32)
    return out


def write_table(path: str, rows: int, cols: int, progress=None) -> TensorFile:
    """A float32 TensorFile of rows x cols holding expected_rows (row ids must stay exact in float32)."""
    if rows > 1 << 24:
        raise ValueError(f"rows must be <= 2**24 (row ids are stored exactly in float32), got {rows}")
    tf = TensorFile.create(path, (rows, cols), "float32", overwrite=True)
    step = max(1, WRITE_CHUNK_BYTES // (cols * 4))
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        tf[start:stop] = expected_rows(torch.arange(start, stop), cols)
        if progress:
            progress(stop, rows)
    tf.sync()
    return tf


def proc_read_bytes(pid: int | str = "self") -> int:
    """Bytes this process (every thread of it) had the block layer read for it (/proc/PID/io read_bytes): page
    faults, buffered and O_DIRECT reads alike; -1 where the kernel does not keep the count."""
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def proc_cpu_seconds(pid: int | str = "self") -> float:
    """User + system CPU seconds of a live process (/proc/PID/stat); 0.0 where it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RowBatches(torch.utils.data.Dataset):
    """Item (source, pass, i): batch i of pass `pass` — `batch_rows` row ids drawn uniformly from a generator
    seeded by (seed, pass, i), the same ids for both sources — read by `source`: "gpuio" through the TensorFile
    this dataset holds (gpuio reopens it on the engine of the process that reads: fork inherits it, spawn
    pickles it), "memmap" through np.memmap of the same file opened in the process that reads, random access
    advised (gpuio_apps.baselines.MemmapRows(random_access=True): the kinder mmap baseline out of core), PLAIN through the
    same opened as users open it (batches of batch_rows // PLAIN_ROWS_DIV rows). Returns (ids, rows, pid, the
    process's read_bytes after the read)."""

    def __init__(self, table: TensorFile, batch_rows: int, seed: int = 0):
        self.table, self.path, self.batch_rows, self.seed = table, table.path, batch_rows, seed
        self.num_rows = int(table.shape[0])
        self._maps: dict = {}  # source -> (pid, MemmapRows)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_maps"] = {}  # a mapping is opened where it is read
        return state

    def rows_of(self, source: str) -> int:
        """Rows a batch of `source` has: batch_rows, PLAIN_ROWS_DIV times fewer for PLAIN."""
        return max(1, self.batch_rows // PLAIN_ROWS_DIV) if source == PLAIN else self.batch_rows

    def ids(self, pass_no: int, i: int, rows: int | None = None) -> torch.Tensor:
        g = torch.Generator().manual_seed(((self.seed * 1_000_003 + pass_no) * 1_000_003 + i) % (1 << 63))
        return torch.randint(0, self.num_rows, (rows or self.batch_rows,), generator=g)

    def _mapping(self, source: str) -> MemmapRows:
        pid, rows = self._maps.get(source, (None, None))
        if pid != os.getpid():
            rows = MemmapRows(self.path, random_access=source == "memmap")
            self._maps[source] = (os.getpid(), rows)
        return rows

    def __getitem__(self, key):
        source, pass_no, i = key
        if source not in SOURCES + (PLAIN,):
            raise ValueError(f"source must be one of {SOURCES + (PLAIN,)}, got {source!r}")
        ids = self.ids(pass_no, i, self.rows_of(source))
        rows = self.table[ids] if source == "gpuio" else self._mapping(source).gather(ids)
        return ids, rows, os.getpid(), proc_read_bytes()


def make_loader(ds: RowBatches, keys: Keys, workers: int, method: str | None, timeout_s: float = 120):
    """A DataLoader over `ds` yielding one batch per key; persistent workers (so a pass times reading, not
    starting processes), each wait bounded by timeout_s."""
    if not workers:
        return torch.utils.data.DataLoader(ds, batch_size=None, sampler=keys)
    return torch.utils.data.DataLoader(ds, batch_size=None, sampler=keys, num_workers=workers,
                                       multiprocessing_context=method, persistent_workers=True,
                                       timeout=timeout_s)


def run_pass(loader, keys: Keys, source: str, pass_no: int, batches: int, seconds: float, cols: int,
             worker_pids: set) -> dict:
    """Read up to `batches` batches of `source` (pass `pass_no`) through `loader`, stopping after `seconds`;
    every row is checked. Returns rows, seconds, rows_s, the bytes the main process and the workers had read
    from the device meanwhile, the pids that read, and the CPU seconds of main + workers."""
    keys.keys = [(source, pass_no, i) for i in range(batches)]
    known = set(worker_pids)
    main_read0, cpu0 = proc_read_bytes(), proc_cpu_seconds() + sum(proc_cpu_seconds(p) for p in known)
    first: dict = {}
    last: dict = {}
    rows = 0
    # iter() of persistent workers first waits for the batches the previous pass left queued (prefetch_factor x
    # workers, read by the previous source): the clock starts after it, or those reads would count against
    # this pass (4 workers: about a fifth of a 1.5 s pass)
    batches_in = iter(loader)
    t0 = time.perf_counter()
    for ids, got, pid, read in batches_in:
        if not torch.equal(got, expected_rows(ids, cols)):
            bad = int((got != expected_rows(ids, cols)).any(1).nonzero()[0])
            raise AssertionError(f"{source}: row {int(ids[bad])} read wrong (pass {pass_no}, pid {pid})")
        rows += ids.numel()
        pid = int(pid)
        first.setdefault(pid, int(read))
        last[pid] = int(read)
        if time.perf_counter() - t0 > seconds:
            break  # persistent workers drop what they still hold at the next pass
    elapsed = time.perf_counter() - t0
    main = os.getpid()
    worker_pids.update(p for p in last if p != main)
    cpu = proc_cpu_seconds() + sum(proc_cpu_seconds(p) for p in worker_pids) - cpu0
    # workers: bytes read from each one's first to its last batch of the pass (its first batch's own reads
    # are not seen: a slight undercount, said in the report)
    workers_read = sum(last[p] - first[p] for p in last if p != main)
    return dict(rows=rows, seconds=elapsed, rows_s=rows / elapsed, main_read_bytes=proc_read_bytes() - main_read0,
                workers_read_bytes=workers_read, readers=sorted(last), cpu_s=cpu)


def io_by(r: dict) -> str:
    """Which process did the I/O of a pass, from its read_bytes counts."""
    main, workers = r["main_read_bytes"], r["workers_read_bytes"]
    n = len([p for p in r["readers"] if p != os.getpid()])
    if main < 0:
        return "unknown (no /proc/PID/io)"
    if not n:
        return f"main {main / 2**20:.0f} MiB"
    return f"{n} workers {workers / 2**20:.0f} MiB, main {main / 2**20:.0f} MiB"


__all__ = ["PLAIN", "PLAIN_ROWS_DIV", "SOURCES", "RowBatches", "expected_rows", "io_by", "make_loader",
           "proc_cpu_seconds", "proc_read_bytes", "run_pass", "write_table"]
