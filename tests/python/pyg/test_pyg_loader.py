"""PyG integration: NodeLoader over (gpuio.pyg.PygFeatureStore, GraphStore) with gpuio's pure-PyTorch sampler."""
import json
import os
import subprocess
import sys

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


# PyG's compiled extensions, made unimportable (None in sys.modules: `import` raises ImportError and
# importlib.util.find_spec answers None, as where they are not installed) before torch_geometric is imported
_WITHOUT_EXTENSIONS = r"""
import json, sys
EXTENSIONS = ("pyg_lib", "torch_sparse", "torch_scatter", "torch_cluster", "torch_spline_conv")
for name in EXTENSIONS:
    sys.modules[name] = None

import torch
import torch_geometric.typing as pyg_typing
from torch_geometric.loader import NodeLoader

import gpuio.pyg as gp
from gpuio.cache import TableCache
from gpuio.graph import coalesce_undirected
from gpuio.tensor import TensorFile
from gpuio_apps.data import rmat_edges

n = 500
graph = coalesce_undirected(rmat_edges(n, 4000, seed=3), n)
x = torch.randn(n, 8, generator=torch.Generator().manual_seed(0))
tf = TensorFile.create(sys.argv[1], (n, 8), "float32")
tf.scatter(torch.arange(n), x)
fs = gp.PygFeatureStore()
fs.put_tensor(TableCache(tf, gpu_cache_bytes=8 * 4096, device="cpu"), group_name=None, attr_name="x", index=None)
gs = gp.GraphStore()
gs.put_edge_index((graph[0], graph[1]), edge_type=None, layout="coo", size=(n, n))
loader = NodeLoader(data=(fs, gs), node_sampler=gp.NeighborSampler(gs, num_neighbors=[5, 3], seed=1),
                    input_nodes=torch.arange(100), batch_size=32)
edges = set(zip(graph[0].tolist(), graph[1].tolist()))
seeds, sampled_edges = [], 0
for data in loader:
    assert torch.equal(data.x, x[data.n_id]), "features differ from the table"
    src, dst = data.n_id[data.edge_index[0]], data.n_id[data.edge_index[1]]
    assert all(e in edges for e in zip(src.tolist(), dst.tolist())), "a sampled edge is not in the graph"
    seeds.append(data.n_id[: data.batch_size])
    sampled_edges += data.edge_index.size(1)
tf.close()
print(json.dumps({"seeds": torch.cat(seeds).tolist(), "edges": sampled_edges,
                  "pyg_saw": [pyg_typing.WITH_PYG_LIB, pyg_typing.WITH_TORCH_SPARSE],
                  "loaded": [m for m in EXTENSIONS if sys.modules.get(m) is not None]}))
"""


def test_no_pyg_lib_needed(tmp_path):
    """gpuio's stores and sampler under PyG's NodeLoader need none of PyG's compiled extensions (pyg-lib,
    torch-sparse, torch-scatter, ...): with them made unimportable, in a fresh interpreter, the loader yields every
    seed with the table's features and real edges."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", _WITHOUT_EXTENSIONS, str(tmp_path / "x.npy")], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.splitlines()[-1])
    assert got["pyg_saw"] == [False, False] and got["loaded"] == []  # PyG itself found them absent
    assert got["seeds"] == list(range(100)) and got["edges"] > 0


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
