"""PyG integration: NodeLoader over (gpuio.pyg.PygFeatureStore, GraphStore) with gpuio's pure-PyTorch sampler."""
import importlib.util

import pytest
import torch
from torch_geometric.loader import NodeLoader

import gpuio.pyg as gp
from gpuio.cache import TableCache
from gpuio_apps.data import rmat_edges
from gpuio.graph import coalesce_undirected
from gpuio.tensor import TensorFile

N = 500


@pytest.fixture
def graph():
    return coalesce_undirected(rmat_edges(N, 4000, seed=3), N)


@pytest.fixture
def stores(tmp_path, graph):
    x = torch.randn(N, 8, generator=torch.Generator().manual_seed(0))
    tf = TensorFile.create(tmp_path / "x.npy", (N, 8), "float32")
    tf.scatter(torch.arange(N), x)
    fs = gp.PygFeatureStore()
    fs.put_tensor(TableCache(tf, gpu_cache_bytes=8 * 4096, device="cpu"), group_name=None, attr_name="x",
                  index=None)
    fs.put_tensor(torch.arange(N) % 5, group_name=None, attr_name="y", index=None)
    gs = gp.GraphStore()
    gs.put_edge_index((graph[0], graph[1]), edge_type=None, layout="coo", size=(N, N))
    yield fs, gs, x
    tf.close()


def _edge_set(graph):
    return set(zip(graph[0].tolist(), graph[1].tolist()))


def test_no_pyg_lib_needed():
    print("pyg-lib installed:", importlib.util.find_spec("pyg_lib") is not None)


def test_node_loader_over_gpuio_stores(stores, graph):
    fs, gs, x = stores
    sampler = gp.NeighborSampler(gs, num_neighbors=[5, 3], seed=1)
    loader = NodeLoader(data=(fs, gs), node_sampler=sampler, input_nodes=torch.arange(100), batch_size=32)
    edges = _edge_set(graph)
    seen = []
    for data in loader:
        assert torch.equal(data.x, x[data.n_id])
        assert torch.equal(data.y, data.n_id % 5)
        seeds = data.n_id[: data.batch_size]
        seen.append(seeds)
        src, dst = data.n_id[data.edge_index[0]], data.n_id[data.edge_index[1]]
        assert all(e in edges for e in zip(src.tolist(), dst.tolist()))
        assert torch.equal(graph[:, data.e_id], torch.stack([src, dst]))
        assert data.n_id.unique().numel() == data.n_id.numel()
    assert torch.equal(torch.cat(seen), torch.arange(100))


def test_fanout_bounds_and_full_neighbourhoods(graph):
    s = gp.NeighborSampler(graph, num_neighbors=[4], seed=0, num_nodes=N)
    seeds = torch.arange(0, N, 3)
    out = s.sample(seeds)
    indeg = torch.bincount(graph[1], minlength=N)
    per_seed = torch.bincount(out.col, minlength=seeds.numel())
    assert torch.equal(per_seed, indeg[seeds].clamp(max=4))
    assert out.edge.unique().numel() == out.edge.numel()  # without replacement: no edge twice
    full = gp.NeighborSampler(graph, num_neighbors=[-1], num_nodes=N, seed=0).sample(seeds)
    assert torch.equal(torch.bincount(full.col, minlength=seeds.numel()), indeg[seeds])


def test_sampling_is_seeded_and_uniform(graph):
    a = gp.NeighborSampler(graph, [5, 5], seed=11, num_nodes=N).sample(torch.arange(20))
    b = gp.NeighborSampler(graph, [5, 5], seed=11, num_nodes=N).sample(torch.arange(20))
    assert torch.equal(a.node, b.node) and torch.equal(a.edge, b.edge)
    # node 0 is a hub: each of its in-edges should be drawn about k/deg of the time
    hub = int(torch.bincount(graph[1]).argmax())
    deg = int((graph[1] == hub).sum())
    s = gp.NeighborSampler(graph, [3], seed=5, num_nodes=N)
    counts = torch.zeros(graph.size(1))
    trials = 400
    for _ in range(trials):
        counts[s.sample(torch.tensor([hub])).edge] += 1
    freq = counts[graph[1] == hub] / trials
    assert deg > 3 and float((freq - 3 / deg).abs().max()) < 0.12


def test_sampler_bad_input(graph):
    with pytest.raises(ValueError, match="0"):
        gp.NeighborSampler(graph, num_neighbors=[0])
    s = gp.NeighborSampler(graph, [2], num_nodes=N)
    with pytest.raises(IndexError, match=str(N)):
        s.sample(torch.tensor([N]))
    with pytest.raises(TypeError, match="str"):
        gp.NeighborSampler("graph", [2])
