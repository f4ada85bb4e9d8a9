"""A StreamStore and its open readers in other processes: pickled (spawn/forkserver DataLoader workers, spawned
ranks) and inherited through fork. The receiver reopens the store, never formatting it, as the writer only when it
gets the writer lock at once, else read-only; readers go on from their position; writers never travel. Every case
checks every byte and is bounded by a timeout (DataLoader's own, or an alarm in the forked child)."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch

from gpuio.streams import StreamStore
from streams_util import contents, open_small, read_all, same, write_all
from workers_stores import SEED, STREAMS, StreamsDataset, check_streams_loader, make_stream_store
from workers_util import fork_and_wait

START_METHODS = ["fork", "spawn", "forkserver"]


def _all_same(got, want) -> bool:
    return len(got) == len(want) and all(same(a, b) for a, b in zip(got, want))


def test_pickled_store_arrives_read_only_while_the_writer_holds_the_lock(tmp_path):
    store = make_stream_store(tmp_path / "s.bin")
    back = pickle.loads(pickle.dumps(store))
    assert store.writable and not back.writable and back.paths == store.paths
    assert back.sblock_bytes == store.sblock_bytes and back.prefetch_depth == store.prefetch_depth
    for i in range(STREAMS):
        assert _all_same(read_all(back, i), contents(SEED, i))
    with pytest.raises(ValueError, match="cannot create a stream: .* read-only here .*writer lock"):
        back.create_stream()
    with pytest.raises(ValueError, match="cannot destroy stream 3: .* read-only"):
        back.destroy_stream(3)
    with pytest.raises(ValueError, match="read-only"):
        back.read_and_destroy_stream(3)
    assert back.check()["streams"] == STREAMS and back.stats()["writable"] is False
    # the writer goes on; the reader sees a stream published since once it asks for it (the table is read again)
    new = write_all(store, [b"late", {"k": 1}])
    assert new not in back
    assert _all_same(read_all(back, new), [b"late", {"k": 1}])
    store.destroy_stream(0)
    back.refresh()
    assert 0 not in back and back.streams() == store.streams()
    back.close()
    store.close()


def test_pickled_closed_store_arrives_as_the_writer_and_never_formats(tmp_path):
    store = make_stream_store(tmp_path / "s.bin")
    store.close()
    back = pickle.loads(pickle.dumps(store))  # made with mode="w": arriving formats nothing
    assert back.writable
    assert _all_same(read_all(back, 4), contents(SEED, 4))
    sid = write_all(back, [b"from the receiver"])
    back.close()
    with StreamStore(store.paths[0], mode="r") as ro:
        assert not ro.writable and _all_same(read_all(ro, sid), [b"from the receiver"])
        assert ro.check()["streams"] == STREAMS + 1


def test_dataset_cache_pickles_with_its_store(tmp_path):
    from gpuio.streams import DatasetCache

    cache = DatasetCache(str(tmp_path / "c.bin"), mode="c", create_bytes=4 << 20, sblock_bytes=16384,
                         buffer_pool_bytes=16384 * 12)
    batches = [np.arange(k * 100, dtype=np.int32) for k in range(1, 6)]
    cache.fill(iter(batches))
    back = pickle.loads(pickle.dumps(cache))
    assert not back.store.writable and back.stream_id == cache.stream_id
    assert _all_same(list(back), batches) and _all_same(list(cache), batches)
    back.close()
    cache.close()


def test_read_only_and_unlocked_stores_arrive_read_only(tmp_path):
    make_stream_store(tmp_path / "s.bin").close()
    ro = StreamStore(str(tmp_path / "s.bin"), mode="r")
    with pytest.raises(ValueError, match="mode='r'"):
        ro.create_stream()
    assert not pickle.loads(pickle.dumps(ro)).writable
    ro.close()
    unlocked = open_small(tmp_path / "s.bin", mode="r+", lock=False)
    back = pickle.loads(pickle.dumps(unlocked))
    assert unlocked.writable and not back.writable
    with pytest.raises(ValueError, match="no lock"):
        back.create_stream()
    back.close()
    unlocked.close()
    with pytest.raises(FileNotFoundError, match="no stream store"):
        StreamStore(str(tmp_path / "missing.bin"), mode="r")


def test_a_second_writer_is_told_to_read_beside_the_first(tmp_path):
    store = make_stream_store(tmp_path / "s.bin")
    with pytest.raises(BlockingIOError, match="another StreamStore holds the writer lock .* mode='r' reads beside"):
        open_small(tmp_path / "s.bin", mode="r+", lock_wait_ms=10)
    with StreamStore(store.paths[0], mode="r") as ro:  # as it says
        assert _all_same(read_all(ro, 3), contents(SEED, 3))
    store.close()


def test_a_read_only_reader_whose_stream_the_writer_destroyed_says_so(tmp_path):
    store = make_stream_store(tmp_path / "s.bin")
    big = [np.full(3000, k, np.int64) for k in range(40)]  # about 60 sblocks
    sid = write_all(store, big)
    ro = StreamStore(store.paths[0], mode="r")
    sd = ro.open_stream(sid)
    assert same(ro.read_stream(sd), big[0])
    store.destroy_stream(sid)
    filler = store.create_stream()  # fills the store: the destroyed stream's blocks now hold other data
    with pytest.raises(OSError) as full:
        for _ in range(10_000):
            store.write_stream(filler, np.full(3000, -1, np.int64))
    assert full.value.errno == 28
    store.close_stream(filler)
    with pytest.raises(KeyError, match=f"stream {sid} was destroyed by the store's writer while this reader read"):
        for _ in big:
            ro.read_stream(sd)
    ro.close()
    store.close()


def test_a_reader_travels_as_its_position(tmp_path):
    store = make_stream_store(tmp_path / "s.bin", sblock_bytes=8192)  # objects straddle sblocks
    want = contents(SEED, 2) + [os.urandom(30000), b"end"]
    sid = write_all(store, want)
    for k in range(len(want) + 1):
        sd = store.open_stream(sid)
        for _ in range(k):
            store.read_stream(sd)
        other = pickle.loads(pickle.dumps(sd))  # this process: a second reader at the same place
        rest = []
        while (obj := other._store.read_stream(other)) is not None:
            rest.append(obj)
        assert _all_same(rest, want[k:])
        assert _all_same([store.read_stream(sd) for _ in want[k:]], want[k:])  # the sender's reader is unaffected
        store.close_stream(sd)
    w = store.create_stream()
    with pytest.raises(TypeError, match="open for writing and does not travel"):
        pickle.dumps(w)
    store.close_stream(w)
    with pytest.raises(TypeError, match="being consumed"):
        pickle.dumps(store.read_and_destroy_stream(1))
    store.close()


def test_forked_child_reads_an_inherited_store_and_refuses_inherited_writers(tmp_path):
    store = make_stream_store(tmp_path / "s.bin")
    reader = store.open_stream(5)
    first = store.read_stream(reader)
    writer = store.create_stream()
    store.write_stream(writer, b"parent's")

    def child():
        if store.writable is not True:  # inherited as it was: nothing reopened before the first call
            return 2
        ok = all(_all_same(read_all(store, i), contents(SEED, i)) for i in range(STREAMS))
        rest = []
        while (obj := store.read_stream(reader)) is not None:  # goes on from where the parent's reader was
            rest.append(obj)
        ok = ok and _all_same([first] + rest, contents(SEED, 5)) and not store.writable
        try:
            store.write_stream(writer, b"child's")
            return 3
        except ValueError as e:
            ok = ok and f"being written by the writer of process {os.getppid()}" in str(e)
        try:
            store.create_stream()
            return 4
        except ValueError as e:
            ok = ok and "read-only" in str(e)
        store.close_stream(writer)  # drops the child's handle; the parent's stream goes on
        return 0 if ok else 5
    assert fork_and_wait(child) == 0
    store.write_stream(writer, b"more")
    store.close_stream(writer)
    assert _all_same(read_all(store, writer.stream_id), [b"parent's", b"more"])
    assert _all_same([first] + [store.read_stream(reader) for _ in contents(SEED, 5)[1:]], contents(SEED, 5))
    assert store.check()["streams"] == STREAMS + 1
    store.close()


def test_forked_child_that_only_closes_leaves_the_parent_store_alone(tmp_path):
    store = make_stream_store(tmp_path / "s.bin")

    def child():
        store.close()
        try:
            store.open_stream(1)
            return 2
        except ValueError as e:
            return 0 if "closed" in str(e) else 3
    assert fork_and_wait(child) == 0
    assert _all_same(read_all(store, 1), contents(SEED, 1)) and store.writable
    store.close()


@pytest.mark.parametrize("method", START_METHODS)
@pytest.mark.parametrize("persistent", [False, True])
def test_dataloader_workers_read_every_stream(tmp_path, method, persistent):
    store = make_stream_store(tmp_path / "dl.bin")
    read_all(store, 0)  # the main process's engine is running before the workers start (fork inherits it)
    loader = torch.utils.data.DataLoader(StreamsDataset(store), batch_size=None, num_workers=2, timeout=60,
                                         multiprocessing_context=method, persistent_workers=persistent)
    for _ in range(2 if persistent else 1):
        pids = check_streams_loader(loader)
        assert os.getpid() not in pids and len(pids) >= 1
    assert store.writable and store.check()["streams"] == STREAMS  # the main process is still the writer
    store.close()
