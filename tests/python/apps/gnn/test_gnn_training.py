"""GNN training through gpuio: identical losses to in-memory features, and Cora accuracy."""
import time

import numpy as np
import torch

from gpuio.cache import TableCache, InMemoryRows
from gpuio_apps.baselines import MemmapRows
from gpuio_apps.data import find_dataset, load_planetoid, synthetic_graph
from gpuio_apps.gnn.train import accuracy, make_model, train_epoch
from gpuio.graph import degree_scores
from gpuio.loader import NodeBatchLoader
from gpuio.pyg import NeighborSampler
from gpuio.tensor import TensorFile


def _losses(data, source, seed, epochs=2):
    sampler = NeighborSampler(data.edge_index, [10, 5], seed=seed, num_nodes=data.num_nodes)
    loader = NodeBatchLoader(sampler, source, data.train_idx, 128, labels=data.y, seed=seed, device="cpu")
    model = make_model("sage", data.num_features, data.num_classes, 32, seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    return [loss for _ in range(epochs) for loss in train_epoch(model, loader, opt)["losses"]]


def test_same_seed_same_losses(tmp_path):
    data = synthetic_graph(tmp_path / "f.npy", num_nodes=3000, num_edges=20000, num_features=32,
                           num_classes=4, seed=5, split=(0.2, 0.1, 0.1))
    table = torch.from_numpy(np.load(tmp_path / "f.npy"))
    gp = TableCache(data.features, gpu_cache_bytes=table.numel(), host_cache_rows=100,
                      hot_scores=degree_scores(data.edge_index, data.num_nodes),
                      window=4, accumulate=True, inflight_pages_min=64, device="cpu")
    in_memory = _losses(data, InMemoryRows(table), seed=3)
    through_gpuio = _losses(data, gp, seed=3)
    through_mmap = _losses(data, MemmapRows(tmp_path / "f.npy"), seed=3)
    assert len(in_memory) == 2 * 5
    assert through_gpuio == in_memory and through_mmap == in_memory
    assert in_memory[-1] < in_memory[0]  # it learns
    s = gp.stats()
    assert s["rows_host"] > 0 and s["rows_gpu_cache"] > 0 and s["rows_device"] > 0
    assert _losses(data, InMemoryRows(table), seed=4) != in_memory  # the seed matters
    data.features.close()


def test_graphsage_on_cora_through_gpuio(tmp_path):
    t0 = time.perf_counter()
    data = load_planetoid(find_dataset("cora"), "cora")  # ships in the repository's datasets/
    tf = TensorFile.create(tmp_path / "cora.npy", data.features.shape, "float32")
    tf.scatter(torch.arange(data.num_nodes), data.features.table)
    store = TableCache(tf, gpu_cache_bytes=8 << 20, host_cache_rows=200,
                         hot_scores=degree_scores(data.edge_index, data.num_nodes), device="cpu")
    train = NodeBatchLoader(NeighborSampler(data.edge_index, [10, 10], seed=0, num_nodes=data.num_nodes),
                            store, data.train_idx, 140, labels=data.y, seed=0, device="cpu")
    model = make_model("sage", data.num_features, data.num_classes, 64, seed=0)
    opt = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=5e-4)
    for _ in range(12):
        train_epoch(model, train, opt)
    test = NodeBatchLoader(NeighborSampler(data.edge_index, [-1, -1], seed=0, num_nodes=data.num_nodes),
                           store, data.test_idx, 500, labels=data.y, shuffle=False, device="cpu")
    acc = accuracy(model, test)
    print(f"Cora test accuracy through gpuio: {acc:.3f} ({time.perf_counter() - t0:.1f} s), {store.stats()}")
    assert acc >= 0.75
    assert store.stats()["storage"]["blocks_read"] > 0  # features really came through the engine
    tf.close()
