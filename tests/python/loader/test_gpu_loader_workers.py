"""gpuio's loaders with sampling in worker processes while the main process gathers through CUDA caches, beside a
training thread doing CUDA work (README "Data loader workers": the GPU pattern). NodeBatchLoader and
gpuio.pyg.NodeLoader with a CPU sampler under fork and spawn, and with a CUDA sampler under spawn (its default),
deliver every row right on the GPU and the same batches as without workers; fork over a CUDA sampler is refused
when the loader is made. Skipped without a GPU; each test runs under the GPU watchdog and every loader under its
workers' DataLoader timeout."""
from __future__ import annotations

import pytest
import torch

import gpuio
from gpu_util import cuda_training, skip_without_gpu, watchdog_fixture, why_no_gpu
from workers_util import ROWS, expected_rows, make_table

pytestmark = [pytest.mark.gpu, skip_without_gpu(why_no_gpu())]
_watchdog = watchdog_fixture("test_gpu_loader_workers")
BOUND = dict(timeout=60)


def _graph():
    from gpuio_apps.data import rmat_edges
    from gpuio.graph import coalesce_undirected
    return coalesce_undirected(rmat_edges(ROWS, 600, seed=5), ROWS)


@pytest.mark.parametrize("method,sampler_device", [("fork", "cpu"), ("spawn", "cpu"), (None, "cuda")])
def test_node_batch_loader_samples_in_workers_and_gathers_through_the_gpu_cache(tmp_path, method, sampler_device):
    from gpuio.loader import NodeBatchLoader
    from gpuio.pyg import NeighborSampler

    tf = make_table(tmp_path / "x.npy")
    graph = _graph()
    runs = []
    with cuda_training(tf):
        for workers in (0, 2):
            store = gpuio.TableCache(tf, gpu_cache_bytes=8 * 4096, window=4, device="cuda")
            sampler = NeighborSampler(graph, [4, 3], seed=1, num_nodes=ROWS, device=sampler_device)
            loader = NodeBatchLoader(sampler, store, torch.arange(ROWS), 16, device="cuda", sample_workers=workers,
                                     start_method=method if workers else None,
                                     worker_options=BOUND if workers else None)
            batches = list(loader) + list(loader)  # two epochs, the same workers
            loader.close()
            for b in batches:
                assert b.x.is_cuda and b.n_id.device.type == sampler_device
                torch.testing.assert_close(b.x.cpu(), expected_rows(b.n_id.cpu()), rtol=0, atol=0)
            runs.append(batches)
    assert len(runs[0]) == len(runs[1]) == 2 * ROWS // 16
    for a, b in zip(*runs):  # the same batches with and without sampling workers
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index)


def test_fork_over_a_cuda_sampler_is_refused_when_the_loader_is_made(tmp_path):
    from gpuio.loader import NodeBatchLoader
    from gpuio.pyg import NeighborSampler

    tf = make_table(tmp_path / "x.npy")
    sampler = NeighborSampler(_graph(), [4], seed=1, num_nodes=ROWS, device="cuda")
    with pytest.raises(ValueError, match="CUDA cannot be used in a forked child"):
        NodeBatchLoader(sampler, tf, torch.arange(ROWS), 16, sample_workers=2, start_method="fork")


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pyg_node_loader_gathers_through_the_gpu_cache_in_the_main_process(tmp_path, method):
    tf = make_table(tmp_path / "x.npy")
    feats, gs = gpuio.pyg.PygFeatureStore(), gpuio.pyg.GraphStore()
    feats.put_tensor(gpuio.TableCache(tf, gpu_cache_bytes=8 * 4096, device="cuda"), group_name=None,
                     attr_name="x", index=None)
    gs.put_edge_index(_graph(), edge_type=None, layout="coo", size=(ROWS, ROWS))
    with cuda_training(tf):
        loader = gpuio.pyg.NodeLoader((feats, gs), gpuio.pyg.NeighborSampler(gs, num_neighbors=[4, 3], seed=1),
                                      input_nodes=torch.arange(ROWS), batch_size=16, shuffle=True, sample_workers=2,
                                      start_method=method, **BOUND)
        seeds = []
        for data in loader:
            assert data.x.is_cuda
            torch.testing.assert_close(data.x.cpu(), expected_rows(data.n_id), rtol=0, atol=0)
            seeds.append(data.n_id[:data.batch_size])
        loader.close()
    assert torch.equal(torch.cat(seeds).sort().values, torch.arange(ROWS))
