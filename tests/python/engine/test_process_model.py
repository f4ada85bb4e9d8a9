"""gpuio in PyTorch's process model: one engine per process whatever the number of files, objects that cross fork,
spawn and forkserver (DataLoader workers, torch.multiprocessing.spawn, os.fork), and errors that say so at once.
Every case checks every byte and is bounded by a timeout (DataLoader's own, or a wait on the child)."""
from __future__ import annotations

import os
import pickle

import pytest
import torch

import gpuio
from gpuio import engine as engine_mod
from workers_util import ROWS, RowsDataset, check_loader, expected_rows, fork_and_wait, make_table, spawned_rank

START_METHODS = ["fork", "spawn", "forkserver"]


def _threads() -> int:
    """gpuio's threads in this process (engine workers, posix I/O threads, the GPU control plane: named gpuio-*)."""
    names = []
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:  # the thread ended meanwhile
            pass
    return sum(n.startswith("gpuio") for n in names)


def test_thirty_files_run_no_more_threads_than_one(tmp_path):
    first = make_table(tmp_path / "t0.npy")
    one = _threads()
    assert one >= 1
    tables = [make_table(tmp_path / f"t{i}.npy") for i in range(1, 30)]
    assert _threads() == one, "each file started threads of its own"
    assert all(t.engine is gpuio.default_engine() for t in [first, *tables])
    assert gpuio.default_engine().target_count >= 30
    for t in tables:
        torch.testing.assert_close(t[[5, 90]], expected_rows([5, 90]), rtol=0, atol=0)
    for t in [first, *tables]:
        t.close()
    assert _threads() == one


def test_closed_file_refuses_use_and_frees_its_target(tmp_path):
    tf = make_table(tmp_path / "c.npy")
    before = gpuio.default_engine().target_count
    tf.close()
    assert gpuio.default_engine().target_count == before - 1
    with pytest.raises(ValueError, match="closed"):
        tf[0]
    tf.close()  # idempotent


def test_dropped_file_closes_its_target(tmp_path):
    import gc

    gc.collect()  # files earlier tests dropped close now, not inside this test's count
    before = gpuio.default_engine().target_count
    tf = make_table(tmp_path / "d.npy")
    assert gpuio.default_engine().target_count == before + 1
    del tf
    gc.collect()
    assert gpuio.default_engine().target_count == before


def test_pickled_file_reopens_with_its_options(tmp_path):
    tf = make_table(tmp_path / "p.npy")
    tf.in_place_devices = ("cpu", "meta")
    back = pickle.loads(pickle.dumps(tf))
    assert back.path == tf.path and back.writable and back.shape == tf.shape
    assert back.in_place_devices == ("cpu", "meta")
    assert back.target is not tf.target
    torch.testing.assert_close(back[torch.arange(ROWS)], expected_rows(range(ROWS)), rtol=0, atol=0)
    ro = pickle.loads(pickle.dumps(gpuio.TensorFile.open(tf.path, "r")))
    assert not ro.writable
    own = gpuio.TensorFile.open(tf.path, "r", workers=1)  # engine-wide options: an engine of its own, and again
    mine = pickle.loads(pickle.dumps(own))
    assert mine.engine is not gpuio.default_engine() and mine.engine.stats()["workers"] == 1


def test_engine_pickles_as_what_it_is(tmp_path):
    assert pickle.loads(pickle.dumps(gpuio.default_engine())) is gpuio.default_engine()
    path = tmp_path / "dev.bin"
    gpuio.Engine.create_file(path, 1 << 20)
    with gpuio.Engine(path, workers=1, queue_depth=8) as eng:
        again = pickle.loads(pickle.dumps(eng))
        assert again.paths == eng.paths and again.stats()["workers"] == 1
        again.close()


def test_forked_child_reads_an_inherited_file_at_once(tmp_path):
    tf = make_table(tmp_path / "f.npy")
    tf[3]  # the parent's engine is running

    def child():
        rows = tf[torch.arange(ROWS)]
        tf[5] = torch.full((40,), 7.0)  # and writes, on the child's own engine
        ok = torch.equal(rows, expected_rows(range(ROWS))) and tf.engine is gpuio.default_engine()
        return 0 if ok else 3
    assert fork_and_wait(child) == 0
    torch.testing.assert_close(tf[5], torch.full((40,), 7.0), rtol=0, atol=0)  # the parent sees the child's write


def test_forked_child_waiting_on_a_parent_batch_fails_at_once(tmp_path):
    path = tmp_path / "w.bin"
    gpuio.Engine.create_file(path, 8 << 20)
    eng = gpuio.Engine(path, workers=1, queue_depth=1, io_bytes_max=4096)
    out = gpuio.aligned_empty(8 << 20)
    handle = eng.read_async(range(2048), out)

    def child():
        # timeout=0: a wait that is refused because of the fork says so before it waits at all; one that waited
        # instead would raise TimeoutError here (and a hang is bounded by fork_and_wait's alarm)
        try:
            handle.wait(timeout=0)
            return 0 if handle.done() else 4  # it ended before the fork: fine
        except RuntimeError as e:
            said = "fork" in str(e) and "submit the request again" in str(e)
            return 0 if said else 5
    assert fork_and_wait(child) == 0
    handle.wait()

    def submits():
        try:
            eng.read([0], gpuio.aligned_empty(4096))
            return 6
        except RuntimeError as e:
            return 0 if "belongs to process" in str(e) else 7
    assert fork_and_wait(submits) == 0
    eng.close()


@pytest.mark.parametrize("method", START_METHODS)
@pytest.mark.parametrize("persistent", [False, True])
def test_dataloader_workers_read_every_byte(tmp_path, method, persistent):
    tf = make_table(tmp_path / "dl.npy")
    tf[0]  # the main process's engine is running before the workers start (fork inherits it)
    loader = torch.utils.data.DataLoader(RowsDataset(tf), batch_size=8, num_workers=2, timeout=60,
                                         multiprocessing_context=method, persistent_workers=persistent)
    for _ in range(2 if persistent else 1):
        pids = check_loader(loader)
        assert os.getpid() not in pids and len(pids) >= 1


def test_torch_multiprocessing_spawn_receives_a_table(tmp_path):
    import torch.multiprocessing as mp

    tf = make_table(tmp_path / "mp.npy")
    mp.spawn(spawned_rank, args=(tf, str(tmp_path)), nprocs=2, join=True)
    assert [(tmp_path / f"rank{r}").read_text() for r in range(2)] == ["ok", "ok"]


def test_process_engine_options_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("GPUIO_QUEUE_DEPTH", "64")
    monkeypatch.setenv("GPUIO_SQPOLL", "off")
    opts = engine_mod.process_engine_options()
    assert opts["queue_depth"] == 64 and opts["sqpoll"] is False and opts["workers"] is None
    monkeypatch.setenv("GPUIO_QUEUE_DEPTH", "deep")
    with pytest.raises(ValueError, match="GPUIO_QUEUE_DEPTH='deep'"):
        engine_mod.process_engine_options()
