"""Sampling in worker processes, the gather in the main process (README "Data loader workers"): NodeBatchLoader,
HeteroBatchLoader and gpuio.pyg.NodeLoader give the same batches with 0 and 2 sampling workers under every start
method, keep the feature store's look-ahead order, sample nothing in the main process when workers do, stop their
workers on close, deliver a worker's error, and refuse bad options in one line. Each case is bounded by the
DataLoader timeout the loaders pass to their workers."""
from __future__ import annotations

import multiprocessing
import pickle

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")

import gpuio  # noqa: E402
from gpuio.cache import TableCache  # noqa: E402
from gpuio_apps.data import igbh, synthetic_graph  # noqa: E402
from gpuio.loader import NodeBatchLoader, check_sample_workers  # noqa: E402
from gpuio.pyg import (GraphStore, HeteroBatchLoader, HeteroGraphStore, HeteroNeighborSampler,  # noqa: E402
                       NeighborSampler, NodeLoader, PygFeatureStore, hetero_feature_store)
from loader_workers_util import SAMPLED_IN, CountingSampler  # noqa: E402
from loader_util import expected_order, log_calls  # noqa: E402

START_METHODS = ["fork", "spawn", "forkserver"]
BOUND = dict(timeout=60)  # every wait on a sampling worker ends within this


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    path = tmp_path_factory.mktemp("g") / "f.npy"
    data = synthetic_graph(path, num_nodes=3000, num_edges=20000, num_features=16, num_classes=4, seed=3,
                           split=(0.5, 0.1, 0.1))
    return data, data.features.gather(torch.arange(data.num_nodes))


def _node_loader(data, workers, method=None, sampler_cls=NeighborSampler, **kw):
    store = TableCache(data.features, gpu_cache_bytes=8 * 4096, window=8, accumulate=True, device="cpu")
    sampler = sampler_cls(data.edge_index, [5, 3], seed=3, num_nodes=data.num_nodes)
    return NodeBatchLoader(sampler, store, data.train_idx, 64, labels=data.y, seed=3, device="cpu",
                           sample_workers=workers, start_method=method,
                           worker_options=BOUND if workers else None, **kw), store


def _same_batches(a, b, table) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.equal(x.n_id, y.n_id) and torch.equal(x.edge_index, y.edge_index)
        assert torch.equal(x.y, y.y) and x.batch_size == y.batch_size
        assert torch.equal(x.x, y.x) and torch.equal(x.x, table[x.n_id])  # every byte the table's


@pytest.mark.parametrize("method", START_METHODS)
def test_node_batches_and_lookahead_do_not_depend_on_sampling_workers(graph, method):
    data, table = graph
    ref_loader, _ = _node_loader(data, 0)
    want = list(ref_loader) + list(ref_loader)  # two epochs: the second reshuffled
    loader, store = _node_loader(data, 2, method, CountingSampler)
    log = log_calls(store)
    SAMPLED_IN.clear()
    rng = torch.get_rng_state()
    got = list(loader)
    assert torch.equal(torch.get_rng_state(), rng)  # the global RNG (dropout's) is not drawn from
    kinds = "".join(k for k, _ in log)
    got += list(loader)  # the same (persistent) workers again
    loader.close()
    assert SAMPLED_IN == []  # the workers sampled; the main process only gathered
    _same_batches(want, got, table)
    n = len(got) // 2
    assert kinds == expected_order(n, 8)  # announced window batches ahead of submission, as without workers
    assert store.stats()["window_batches"] == 0 and store.stats()["rows_requested"] > 0


def test_an_iteration_left_early_does_not_change_the_next(graph):
    data, table = graph
    runs = []
    for workers in (0, 2):
        loader, _ = _node_loader(data, workers)
        part = []
        for i, b in enumerate(loader):
            part.append(b)
            if i == 2:
                break  # the workers still hold samples of this iteration: dropped at the next
        runs.append(part + list(loader))
        loader.close()
    _same_batches(runs[0], runs[1], table)
    assert len(runs[0]) == 3 + len(loader)


def test_close_stops_the_workers_and_a_closed_loader_refuses(graph):
    data, _ = graph
    before = {p.pid for p in multiprocessing.active_children()}
    loader, _ = _node_loader(data, 2)
    next(iter(loader))
    mine = {p.pid for p in multiprocessing.active_children()} - before
    assert len(mine) == 2  # persistent sampling workers
    loader.close()
    assert not mine & {p.pid for p in multiprocessing.active_children()}
    with pytest.raises(ValueError, match="closed"):
        next(iter(loader))
    loader.close()  # idempotent


def test_a_workers_error_reaches_the_training_loop(graph):
    data, _ = graph
    sampler = NeighborSampler(data.edge_index, [3], seed=0, num_nodes=data.num_nodes)
    bad = torch.tensor([1, 2, data.num_nodes + 5])
    loader = NodeBatchLoader(sampler, TableCache(data.features, 4096, device="cpu"), bad, 2, device="cpu",
                             sample_workers=2, worker_options=BOUND)
    with pytest.raises(IndexError, match="seed node ids must lie in"):
        list(loader)
    loader.close()


def test_bad_worker_options_are_refused_in_one_line(graph):
    data, _ = graph
    for workers in (-1, True, 1.5, "2"):
        with pytest.raises(ValueError, match=f"sample_workers must be an int >= 0, got {workers!r}"):
            _node_loader(data, workers)
    with pytest.raises(ValueError, match="start_method must be one of fork, spawn, forkserver.*'threads'"):
        _node_loader(data, 2, "threads")
    with pytest.raises(ValueError, match="CUDA cannot be used in a forked child; use start_method='spawn'"):
        check_sample_workers(2, "fork", torch.device("cuda"))  # names the device, touches no CUDA
    assert check_sample_workers(2, None, torch.device("cuda")) == "spawn"
    assert check_sample_workers(2, None, torch.device("cpu")) == "fork"
    with pytest.raises(ValueError, match="worker_options may not set num_workers"):
        NodeBatchLoader(NeighborSampler(data.edge_index, [2], num_nodes=data.num_nodes), data.features,
                        data.train_idx, sample_workers=1, worker_options=dict(num_workers=3))


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return igbh.generate_igbh(str(tmp_path_factory.mktemp("igbh")), igbh.IGBHConfig(papers=900, features=8, seed=5))


def _crosses_spawn_or_skip(obj, method: str) -> None:
    if method == "fork":
        return
    try:
        pickle.dumps(obj)
    except (TypeError, pickle.PicklingError) as e:
        pytest.skip(f"{type(obj).__name__} does not pickle yet ({e}): {method} workers need it to")


@pytest.mark.parametrize("method", START_METHODS)
def test_hetero_batches_do_not_depend_on_sampling_workers(ds, method):
    feats = {nt: TableCache(gpuio.TensorFile.open(ds.feature_path(nt)), gpu_cache_bytes=8 << 10, window=8,
                              device="cpu") for nt in ds.node_types}
    tables = {nt: torch.from_numpy(np.load(ds.feature_path(nt))) for nt in ds.node_types}
    graph = HeteroGraphStore.from_dataset(ds, in_memory=False, device="cpu")  # structure read through gpuio
    runs = []
    for workers in (0, 2):
        sampler = HeteroNeighborSampler(graph, [3, 2], seed=4)
        if workers:
            _crosses_spawn_or_skip(sampler, method)
        ld = HeteroBatchLoader(sampler, feats, ds.train_idx, batch_size=60, labels=ds.y, sample_threads=1,
                               max_batches=20, lookahead=2, sample_workers=workers, start_method=method,
                               worker_options=BOUND if workers else None)
        runs.append(list(ld))
        ld.close()
    a, b = runs
    assert len(a) == len(b) == 20
    for x, y in zip(a, b):
        assert all(torch.equal(x.n_id[nt], y.n_id[nt]) for nt in x.n_id)
        assert all(torch.equal(x.edge_index[et], y.edge_index[et]) for et in x.edge_index)
        assert all(torch.equal(y.x[nt], tables[nt][y.n_id[nt]]) for nt in y.x)
        assert torch.equal(x.y, y.y)


def _pyg_stores(data, tmp_path):
    tf = gpuio.TensorFile.create(tmp_path / "x.npy", (data.num_nodes, 16), "float32")
    tf[:] = data.features.gather(torch.arange(data.num_nodes))
    fs, gs = PygFeatureStore(), GraphStore()
    fs.put_tensor(tf, group_name=None, attr_name="x", index=None)
    fs.put_tensor(data.y, group_name=None, attr_name="y", index=None)
    gs.put_edge_index(data.edge_index, edge_type=None, layout="coo", size=(data.num_nodes, data.num_nodes))
    return (fs, gs), tf


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pyg_node_loader_samples_in_workers_and_gathers_here(graph, tmp_path, method):
    data, table = graph
    stores, tf = _pyg_stores(data, tmp_path)
    runs = []
    for workers in (0, 2):
        loader = NodeLoader(stores, CountingSampler(stores[1], [4, 2], seed=9), input_nodes=data.train_idx,
                            batch_size=100, shuffle=True, seed=1, sample_workers=workers, start_method=method,
                            **(BOUND if workers else {}))
        assert loader.filter_per_worker is False
        read = tf.stats()["bytes_read"]
        SAMPLED_IN.clear()
        rng = torch.get_rng_state()
        runs.append([b for _ in range(2) for b in loader])  # two epochs, reshuffled
        assert torch.equal(torch.get_rng_state(), rng)  # the global RNG (dropout's) is not drawn from
        assert bool(SAMPLED_IN) == (workers == 0)  # with workers nothing was sampled here...
        assert tf.stats()["bytes_read"] > read  # ...and the features were read here, through the main's table
        loader.close()
    a, b = runs
    assert len(a) == len(b) == 2 * -(-data.train_idx.numel() // 100)
    for x, y in zip(a, b):
        assert torch.equal(x.n_id, y.n_id) and torch.equal(x.edge_index, y.edge_index)
        assert torch.equal(y.x, table[y.n_id]) and torch.equal(y.y, data.y[y.n_id]) and x.batch_size == y.batch_size
    assert not torch.equal(a[0].n_id, a[len(a) // 2].n_id)  # the second epoch was reshuffled


def test_pyg_node_loader_heterogeneous_with_workers(ds):
    graph = HeteroGraphStore.from_dataset(ds, in_memory=True, device="cpu")
    tables = {nt: gpuio.TensorFile.open(ds.feature_path(nt)) for nt in ds.node_types}
    fs = hetero_feature_store(tables, y={"paper": ds.y})
    runs = []
    for workers in (0, 2):
        loader = NodeLoader((fs, graph), HeteroNeighborSampler(graph, [3, 2], seed=2),
                            input_nodes=("paper", ds.train_idx), batch_size=64, sample_workers=workers,
                            **(BOUND if workers else {}))
        runs.append(list(loader))
        loader.close()
    for x, y in zip(*runs):
        for nt in ds.node_types:
            assert torch.equal(x[nt].n_id, y[nt].n_id)
            assert torch.equal(y[nt].x, torch.from_numpy(np.load(ds.feature_path(nt))[y[nt].n_id.numpy()]))


def test_pyg_node_loader_refuses_what_it_sets(graph, tmp_path):
    data, _ = graph
    stores, _ = _pyg_stores(data, tmp_path)
    sampler = NeighborSampler(stores[1], [2], seed=0)
    with pytest.raises(ValueError, match="sets num_workers itself"):
        NodeLoader(stores, sampler, input_nodes=data.train_idx, num_workers=2)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        NodeLoader(stores, sampler, input_nodes=data.train_idx, batch_size=0)
