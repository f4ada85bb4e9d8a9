"""gpuio's data-holding objects in other processes: the table cache (gpuio.TableCache, host tiers), PyG stores and
samplers, CSC relation files, device arrays and row tables pickle as what they are and reopen on arrival; forked
children use inherited ones at once (fresh locks, files reopened on their own engine). DataLoader and PyG NodeLoader
workers under fork and spawn check every byte; every case is bounded by a timeout (DataLoader's own, or an alarm
in the forked child)."""
from __future__ import annotations

import os
import pickle
import threading

import numpy as np
import pytest
import torch

import gpuio
from gpuio.cache import TableCache
from gpuio_apps.baselines import MemmapRows
from gpuio_apps.data import rmat_edges
from gpuio.graph import coalesce_undirected
from workers_stores import GatherDataset, SamplerSeedDataset
from workers_util import ROWS, check_loader, expected_rows, fork_and_wait, make_table

pyg = pytest.importorskip("torch_geometric")
import gpuio.pyg as gp  # noqa: E402
from torch_geometric.loader import NodeLoader  # noqa: E402


def _host_store(tf, **kw) -> TableCache:
    """A table cache on the host with every tier: host buffer of 30 hot rows, a small page cache, window."""
    return TableCache(tf, gpu_cache_bytes=6 * 4096, host_cache_rows=30, hot_scores=torch.arange(ROWS) % 17,
                        device="cpu", **kw)


def _graph():
    return coalesce_undirected(rmat_edges(ROWS, 600, seed=5), ROWS)


def _pyg_stores(tf):
    fs, gs = gp.PygFeatureStore(), gp.GraphStore()
    fs.put_tensor(_host_store(tf), group_name=None, attr_name="x", index=None)
    fs.put_tensor(torch.arange(ROWS) % 5, group_name=None, attr_name="y", index=None)
    gs.put_edge_index(_graph(), edge_type=None, layout="coo", size=(ROWS, ROWS))
    return fs, gs


# -- pickled round trips -----------------------------------------------------------------------------------------
def test_feature_store_pickles_its_host_tiers_and_rebuilds_an_empty_page_cache(tmp_path):
    fs = _host_store(make_table(tmp_path / "t.npy"), window=4, accumulate=False, policy="lru")
    fs.gather(torch.arange(0, ROWS, 3))  # the page cache fills; counters move
    back = pickle.loads(pickle.dumps(fs))
    assert back.tf is not fs.tf and back.tf.path == fs.tf.path
    assert torch.equal(back.host.rows, fs.host.rows) and torch.equal(back.host.data, fs.host.data)
    assert back.tf.stats()["blocks_read"] == 0  # the host buffer arrived with its rows: nothing read again
    assert back.cache.num_slots == fs.cache.num_slots and back.cache.policy == "lru"
    assert back.window.window == 4 and not back.acc.enabled and back.device == fs.device
    assert back.cache.resident_pages().numel() == 0 and back.stats()["rows_requested"] == 0
    torch.testing.assert_close(back.gather(torch.arange(ROWS)), expected_rows(range(ROWS)), rtol=0, atol=0)
    assert back.stats()["rows_host"] == 30
    shared = pickle.loads(pickle.dumps([fs, TableCache(fs.tf, device="cpu", host_buffer=fs.host)]))
    assert shared[0].host is shared[1].host  # one host buffer shared by two stores stays one


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for a receiver without CUDA")
def test_a_gpu_cache_refuses_to_arrive_where_there_is_no_cuda(tmp_path):
    from gpuio.cache import host_buffer, table_cache

    fs = _host_store(make_table(tmp_path / "t.npy"))
    # what a store made with device="cuda" pickles as, unpickled here
    with pytest.raises(RuntimeError, match="page cache on cuda:0 arrived in a process without CUDA: send one made "
                                           "with device='cpu'"):
        table_cache._arrive(fs.tf, None, "cuda:0", fs._config)
    with pytest.raises(RuntimeError, match="host buffer indexed on cuda:0 arrived in a process without CUDA"):
        host_buffer._arrive(fs.host.rows, fs.host.data, ROWS, "cuda:0")


def test_pyg_stores_samplers_and_row_tables_pickle(tmp_path):
    tf = make_table(tmp_path / "x.npy")
    fs, gs = _pyg_stores(tf)
    owner = gp.PygFeatureStore(root=tmp_path / "owned")
    owner.put_tensor(expected_rows(range(ROWS)), group_name="a", attr_name="x", index=None)
    fs2, gs2, owner2 = pickle.loads(pickle.dumps((fs, gs, owner)))
    ids = torch.tensor([3, 90, 3, 41])
    torch.testing.assert_close(fs2.get_tensor(group_name=None, attr_name="x", index=ids), expected_rows(ids),
                               rtol=0, atol=0)
    assert torch.equal(fs2.get_tensor(group_name=None, attr_name="y", index=None), torch.arange(ROWS) % 5)
    assert torch.equal(gs2.gpuio_csc().colptr, gs.gpuio_csc().colptr)
    path = owner._owned[("a", "x")].path
    owner2.remove_tensor(group_name="a", attr_name="x", index=None)  # a copy never deletes the file the original made
    assert os.path.exists(path)
    torch.testing.assert_close(owner.get_tensor(group_name="a", attr_name="x", index=ids), expected_rows(ids),
                               rtol=0, atol=0)
    owner.remove_tensor(group_name="a", attr_name="x", index=None)
    assert not os.path.exists(path)
    sampler = gp.NeighborSampler(gs, num_neighbors=[4, 3], seed=11)
    copy = pickle.loads(pickle.dumps(sampler))
    a, b = sampler.sample(torch.tensor([1, 7])), copy.sample(torch.tensor([1, 7]))  # same generator state
    assert torch.equal(a.node, b.node) and torch.equal(a.row, b.row) and torch.equal(a.edge, b.edge)
    mm = MemmapRows(tf.path, random_access=True)
    blob = pickle.dumps(mm)
    assert len(blob) < 1000  # the path, not the table
    assert torch.equal(pickle.loads(blob).gather(ids), mm.gather(ids))
    mem = pickle.loads(pickle.dumps(gpuio.rows.InMemoryRows(expected_rows(range(ROWS)))))
    torch.testing.assert_close(mem.gather(ids), expected_rows(ids), rtol=0, atol=0)


def test_hetero_store_and_sampler_pickle_with_their_relation_files(tmp_path):
    from gpuio_apps.data import igbh
    from gpuio.pyg.hetero import HeteroGraphStore, HeteroNeighborSampler

    ds = igbh.generate_igbh(str(tmp_path / "g"), igbh.IGBHConfig(papers=60, features=8, seed=2))
    graph = HeteroGraphStore.from_dataset(ds, in_memory=False, cache_bytes=24 << 10, device="cpu")
    files = list(graph.relations.values())
    assert any(not all(c.whole) for c in files) and any(c.whole[0] for c in files)  # caches and whole files
    sampler = HeteroNeighborSampler(graph, num_neighbors=[3, 2], seed=4)
    copy = pickle.loads(pickle.dumps(sampler))
    assert copy.graph is not graph and copy._lock is not sampler._lock
    for et, csc in copy.graph.relations.items():
        theirs = graph.relations[et]
        assert csc.colptr_tf.target is not theirs.colptr_tf.target and csc.whole == theirs.whole
        assert all(torch.equal(x, y) for x, y in zip(csc.tensors(), theirs.tensors()))
    g = dict(generator=None)
    for s in (sampler, copy):
        g[s] = s.sample(torch.tensor([0, 5, 9]), "paper", generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(g[sampler].node[nt], g[copy].node[nt]) for nt in g[sampler].node)
    assert all(torch.equal(g[sampler].row[et], g[copy].row[et]) for et in g[sampler].row)


def test_device_array_pickles_flushed(tmp_path):
    a = gpuio.DeviceArray.create(tmp_path / "a.npy", 5000, "int32", cache_bytes=8 * 4096, device="cpu",
                                 fill=np.arange(5000))
    a[torch.tensor([7, 4095, 4999])] = torch.tensor([-1, -2, -3], dtype=torch.int32)  # cached, dirty
    b = pickle.loads(pickle.dumps(a))  # flushed first: the receiver reads the writes
    assert b.file.writable and b.cache_bytes == a.cache_bytes and b.ways == a.ways and b.device == a.device
    want = torch.arange(5000, dtype=torch.int32)
    want[torch.tensor([7, 4095, 4999])] = torch.tensor([-1, -2, -3], dtype=torch.int32)
    assert torch.equal(b[torch.arange(5000)], want)
    b.close()
    a.close()


# -- fork -----------------------------------------------------------------------------------------------------
def test_forked_child_uses_inherited_stores_samplers_and_arrays(tmp_path):
    tf = make_table(tmp_path / "x.npy")
    fs, gs = _pyg_stores(tf)
    table = fs.get_tensor(group_name=None, attr_name="x", index=None)  # the parent's engine is running
    sampler = gp.NeighborSampler(gs, num_neighbors=[4, 3], seed=11)
    arr = gpuio.DeviceArray.create(tmp_path / "a.npy", 3000, "int64", cache_bytes=4 * 4096, device="cpu",
                                   fill=np.arange(3000) * 3)
    arr[torch.arange(10)]
    own = gpuio.Engine(None, workers=1)  # a user's own engine: the child reopens on its own process engine
    on_own = gpuio.TensorFile.open(tf.path, engine=own)
    on_own[0]

    def child():
        out = sampler.sample(torch.tensor([2, 50]))
        rows = fs.get_tensor(group_name=None, attr_name="x", index=out.node)
        ok = torch.equal(rows, expected_rows(out.node)) and torch.equal(table, expected_rows(range(ROWS)))
        ok = ok and torch.equal(arr[torch.arange(3000)], torch.arange(3000) * 3)
        arr[5] = -5
        arr.flush()  # the child's own cache, written through the child's engine
        ok = ok and torch.equal(on_own[torch.arange(ROWS)], expected_rows(range(ROWS)))
        ok = ok and on_own.engine is gpuio.default_engine()
        return 0 if ok else 3
    assert fork_and_wait(child) == 0
    arr.invalidate()  # per-process caches: the parent drops its pages to see the child's write
    assert arr[5] == -5 and arr[6] == 18
    on_own.close()
    own.close()
    arr.close()


def test_forked_child_samples_while_a_parent_thread_held_the_sampler_lock(tmp_path):
    from gpuio_apps.data import igbh
    from gpuio.pyg.hetero import HeteroGraphStore, HeteroNeighborSampler

    ds = igbh.generate_igbh(str(tmp_path / "g"), igbh.IGBHConfig(papers=60, features=8, seed=2))
    graph = HeteroGraphStore.from_dataset(ds, in_memory=False, cache_bytes=24 << 10, device="cpu")
    sampler = HeteroNeighborSampler(graph, num_neighbors=[3, 2], seed=4)
    want = sampler.sample(torch.tensor([1, 2]), "paper", generator=torch.Generator().manual_seed(8))
    held, release = threading.Event(), threading.Event()

    def hold():  # a sampling thread of the parent, inside the sampler's locks at the moment of the fork
        with sampler._lock, sampler._io_lock:
            held.set()
            release.wait(30)
    t = threading.Thread(target=hold)
    t.start()
    held.wait(30)
    try:
        def child():
            got = sampler.sample(torch.tensor([1, 2]), "paper", generator=torch.Generator().manual_seed(8))
            return 0 if all(torch.equal(got.node[nt], want.node[nt]) for nt in want.node) else 3
        assert fork_and_wait(child) == 0
    finally:
        release.set()
        t.join()


# -- DataLoader and PyG loader workers ------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers_gather_through_the_host_tiers(tmp_path, method):
    fs = _host_store(make_table(tmp_path / "t.npy"))
    fs.gather(torch.arange(5))  # the main process's engine is running before the workers start
    loader = torch.utils.data.DataLoader(GatherDataset(fs, ROWS), batch_size=8, num_workers=2, timeout=60,
                                         multiprocessing_context=method)
    pids = check_loader(loader)
    assert os.getpid() not in pids and len(pids) >= 1


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pyg_node_loader_with_workers_reads_every_row(tmp_path, method):
    fs, gs = _pyg_stores(make_table(tmp_path / "x.npy"))
    edges = set(zip(*_graph().tolist()))
    loader = NodeLoader((fs, gs), node_sampler=gp.NeighborSampler(gs, num_neighbors=[4, 3], seed=1),
                        input_nodes=torch.arange(ROWS), batch_size=16, num_workers=2, timeout=60,
                        multiprocessing_context=method)
    seeds = []
    for data in loader:
        torch.testing.assert_close(data.x, expected_rows(data.n_id), rtol=0, atol=0)
        assert torch.equal(data.y, data.n_id % 5)
        src, dst = data.n_id[data.edge_index[0]], data.n_id[data.edge_index[1]]
        assert all(e in edges for e in zip(src.tolist(), dst.tolist()))
        seeds.append(data.n_id[:data.batch_size])
    assert torch.equal(torch.cat(seeds).sort().values, torch.arange(ROWS))


def test_samplers_draw_independently_in_each_worker(tmp_path):
    sampler = gp.NeighborSampler(_graph(), num_neighbors=[2], seed=5)
    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(SamplerSeedDataset(sampler), batch_size=None, num_workers=2, timeout=60,
                                         multiprocessing_context="fork")
    seeds = {}
    for seed, pid in loader:
        seeds.setdefault(int(pid), set()).add(int(seed))
    assert len(seeds) == 2 and all(len(s) == 1 for s in seeds.values())  # one generator per worker
    a, b = (s.pop() for s in seeds.values())
    assert a != b and 5 not in (a, b)
    assert sampler.generator.initial_seed() == 5  # the main process's own is untouched
