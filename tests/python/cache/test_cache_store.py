"""gpuio.TableCache tiers: results equal the table; window, host buffer, accumulator behave as stated."""
import numpy as np
import pytest
import torch

from gpuio.cache import TableCache, InMemoryRows
from gpuio.graph import degree_scores, pagerank_scores
from gpuio.tensor import TensorFile

SEED = 7


@pytest.fixture
def table():
    g = torch.Generator().manual_seed(SEED)
    return torch.randn(2000, 16, generator=g)  # 64-byte rows: 64 rows per 4 KiB page


@pytest.fixture
def tfile(tmp_path, table):
    tf = TensorFile.create(tmp_path / "f.npy", tuple(table.shape), "float32")
    tf.scatter(torch.arange(table.shape[0]), table)
    yield tf
    tf.close()


@pytest.mark.parametrize("policy", ["clock", "lru", "fifo", "random"])
def test_results_equal_table(tfile, table, policy):
    print(f"seed={SEED}")
    g = torch.Generator().manual_seed(SEED)
    hot = torch.rand(2000, generator=g)
    fs = TableCache(tfile, gpu_cache_bytes=6 * 4096, host_cache_rows=100, hot_scores=hot, window=3,
                      accumulate=True, policy=policy, inflight_pages_min=10, device="cpu")
    tickets = []
    for i in range(40):
        n = int(torch.randint(0, 300, (1,), generator=g))
        idx = torch.randint(0, 2000, (n,), generator=g)
        if n > 2:
            idx[2] = idx[0]
        fs.announce(idx)
        tickets.append((idx, fs.submit(idx)))
        fs.cache.check_invariants()
    fs.flush()
    for idx, t in tickets:
        assert torch.equal(t.wait(), table[idx])
    s = fs.stats()
    assert s["rows_requested"] == sum(i.numel() for i, _ in tickets)
    assert s["rows_host"] + s["rows_gpu_cache"] + s["rows_device"] == s["rows_requested"]
    assert s["window_batches"] == 0 and s["batches_pending"] == 0
    assert int((fs.cache.slot_page >= 0).sum()) <= 6


def test_window_protects_announced_pages(table):
    src = InMemoryRows(table)
    for announce in (False, True):
        fs = TableCache(src, gpu_cache_bytes=4 * 4096, window=3, accumulate=False, device="cpu")
        later = torch.tensor([0, 64])  # pages 0 and 1
        new = torch.arange(128, 128 + 64 * 6, 64)  # 6 new pages through a 4-slot cache
        fs.gather(later)  # now cached
        if announce:  # every served batch, in serving order
            fs.announce(torch.tensor([5]))  # the next batch served (it only needs page 0)
            fs.announce(new)
            fs.announce(later)  # the batch after them: pages 0 and 1
        fs.gather(torch.tensor([5]))
        fs.gather(new)
        before = fs.stats()["pages_hit"]
        assert torch.equal(fs.gather(later), table[later])
        hits = fs.stats()["pages_hit"] - before
        assert hits == (2 if announce else 0), f"announce={announce}"


def test_host_buffer_serves_hot_rows(table):
    src = InMemoryRows(table)
    hot = torch.zeros(2000)
    hot[[3, 700, 1999]] = 1.0
    fs = TableCache(src, gpu_cache_bytes=4096 * 8, host_cache_rows=3, hot_scores=hot, accumulate=False,
                      device="cpu")
    idx = torch.tensor([3, 700, 1999, 3, 5])
    assert torch.equal(fs.gather(idx), table[idx])
    s = fs.stats()
    assert s["rows_host"] == 4 and s["rows_device"] == 1 and s["host_rows"] == 3
    assert fs.cache.resident_pages().tolist() == [0]  # only row 5's page entered the cache
    assert fs.stats()["pages_miss"] == 1


def test_host_rows_by_degree(table):
    edge_index = torch.stack([torch.full((50,), 42), torch.arange(50) + 100])  # node 42 feeds 50 nodes
    fs = TableCache(InMemoryRows(table), gpu_cache_bytes=0, host_cache_rows=1,
                      hot_scores=degree_scores(edge_index, 2000), device="cpu")
    assert fs.host.rows.tolist() == [42]
    fs2 = TableCache(InMemoryRows(table), gpu_cache_bytes=0, host_cache_rows=1,
                       hot_scores=pagerank_scores(edge_index, 2000), device="cpu")
    assert fs2.host.num_rows == 1
    assert torch.equal(fs2.gather(torch.tensor([42, 7])), table[[42, 7]])


def test_accumulator_merges_micro_batches(tfile, table):
    fs = TableCache(tfile, gpu_cache_bytes=64 * 4096, accumulate=True, inflight_pages_min=5, device="cpu")
    reads = tfile.stats()["gathers"]
    t1 = fs.submit(torch.tensor([0, 1]))  # page 0
    t2 = fs.submit(torch.tensor([64 * 3]))  # page 3
    assert not t1.done() and not t2.done()
    assert fs.stats()["requests_in_flight"] == 2 and tfile.stats()["gathers"] == reads
    t3 = fs.submit(torch.arange(64 * 5, 64 * 8, 64))  # pages 5, 6, 7: 5 missing pages pending -> flush
    assert t1.done() and t2.done() and t3.done()
    assert tfile.stats()["gathers"] == reads + 1  # one merged read for three batches
    assert torch.equal(t2.wait(), table[[192]]) and torch.equal(t3.wait(), table[[320, 384, 448]])
    off = TableCache(tfile, gpu_cache_bytes=64 * 4096, accumulate=False, device="cpu")
    assert off.submit(torch.tensor([0])).done()


def test_batch_larger_than_cache_bypasses(tfile, table):
    fs = TableCache(tfile, gpu_cache_bytes=2 * 4096, accumulate=False, device="cpu")
    idx = torch.arange(0, 2000, 7)
    assert torch.equal(fs.gather(idx), table[idx])
    s = fs.stats()
    assert s["cache_slots"] == 2 and s["pages_bypass"] == s["pages_miss"] - 2
    assert fs.gather(torch.tensor([], dtype=torch.long)).shape == (0, 16)


def test_bad_arguments(table):
    src = InMemoryRows(table)
    with pytest.raises(ValueError, match="-1"):
        TableCache(src, gpu_cache_bytes=-1)
    with pytest.raises(ValueError, match="needs hot_scores"):
        TableCache(src, host_cache_rows=10)
    with pytest.raises(ValueError, match="1999"):
        TableCache(src, host_cache_rows=10, hot_scores=np.ones(1999))
    fs = TableCache(src, device="cpu")
    with pytest.raises(IndexError, match="2000"):
        fs.gather(torch.tensor([2000]))
    with pytest.raises(TypeError, match="float"):
        fs.gather(torch.tensor([0.5]))


@pytest.mark.parametrize("in_place", [True, False])
def test_block_sized_rows_all_miss_hit_and_mixed(tmp_path, in_place):
    """4 KiB rows (one row per page): distinct all-miss batches are read in place (or sorted and permuted,
    as for CUDA destinations); hits, duplicates, host rows and bypassed pages return the table's rows."""
    g = torch.Generator().manual_seed(SEED)
    table = torch.randn(300, 1024, generator=g)
    with TensorFile.create(tmp_path / "b.npy", (300, 1024), "float32") as tf:
        tf.scatter(torch.arange(300), table)
        tf.in_place_devices = ("cpu",) if in_place else ()
        fs = TableCache(tf, gpu_cache_bytes=8 * 4096, host_cache_rows=10, hot_scores=torch.arange(300.0),
                          window=0, device="cpu")
        first = torch.randperm(250, generator=g)[:40]  # distinct, none hot, none cached: all miss
        batches = [first, first[:8], torch.cat([first[:4], first[30:]]), torch.tensor([299, 5, 5, 7]),
                   torch.empty(0, dtype=torch.long)]
        for idx in batches:
            assert torch.equal(fs.gather(idx), table[idx])
            fs.cache.check_invariants()
        s = fs.stats()
        assert s["rows_host"] == 1 and s["pages_bypass"] >= 32 and s["rows_gpu_cache"] > 0
        assert s["rows_host"] + s["rows_gpu_cache"] + s["rows_device"] == s["rows_requested"]


def test_pinned_empty_without_cuda_is_a_plain_tensor_of_the_shape():
    """The host buffer's allocator: the shape and dtype asked for (pinned exactly on a GPU machine: test_gpu.py)."""
    from gpuio.cache.host_buffer import pinned_empty

    t = pinned_empty((5, 7), torch.float16)
    assert t.shape == (5, 7) and t.dtype == torch.float16 and t.is_contiguous()
    assert pinned_empty((0, 3), torch.float32).shape == (0, 3)
