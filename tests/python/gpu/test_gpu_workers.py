"""gpuio objects in worker processes while the main process holds CUDA caches, beside a training thread doing CUDA
work (the GPU machine's half of tests/python/*/test_process_*.py). A forked child that touches inherited CUDA state
(a GPU page cache, a CUDA device array or sampler, stream reads into CUDA) fails at once with gpuio.gpu.BAD_FORK's
line while its host-side objects just work; DataLoader workers (fork and spawn) read stream stores and host tiers
beside CUDA training; PyG's NodeLoader samples in its workers and gathers through the main process's GPU cache
(filter_per_worker=False: the GPU side stays in the main process, as fork requires). Skipped without a GPU; each
test runs under the GPU watchdog and every loader under DataLoader's timeout."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import gpuio
from gpu_util import cuda_training, skip_without_gpu, watchdog_fixture, why_no_gpu
from workers_stores import STREAMS, GatherDataset, StreamsDataset, check_streams_loader, make_stream_store
from workers_util import ROWS, check_loader, expected_rows, fork_and_wait, make_table

pytestmark = [pytest.mark.gpu, skip_without_gpu(why_no_gpu())]
_watchdog = watchdog_fixture("test_gpu_workers")


def _refused_at_once(call) -> bool:
    """The call raises gpuio.gpu.BAD_FORK's line (not a CUDA error, not a timeout after a wait); a hang is bounded
    by fork_and_wait's alarm."""
    try:
        call()
        return False
    except RuntimeError as e:
        return str(e) == gpuio.gpu.BAD_FORK


def test_forked_child_touching_inherited_cuda_state_fails_at_once(tmp_path):
    tf = make_table(tmp_path / "t.npy")
    gpu_fs = gpuio.TableCache(tf, gpu_cache_bytes=8 * 4096, device="cuda")
    host_fs = gpuio.TableCache(tf, gpu_cache_bytes=8 * 4096, host_cache_rows=20,
                                 hot_scores=torch.arange(ROWS), device="cpu")  # pinned host buffer
    ids = torch.tensor([1, 50, 95])
    assert torch.equal(gpu_fs.gather(ids).cpu(), expected_rows(ids))
    assert torch.equal(host_fs.gather(ids), expected_rows(ids))
    arr = gpuio.DeviceArray.create(tmp_path / "a.npy", 4096, "int32", cache_bytes=8 * 4096, device="cuda",
                                   fill=np.arange(4096))
    arr[torch.tensor([3], device="cuda")]
    edges = torch.randint(0, ROWS, (2, 400))
    sampler = gpuio.pyg.NeighborSampler(edges, num_neighbors=[3], seed=1, device="cuda")
    sampler.sample(torch.tensor([0]))
    store = make_stream_store(tmp_path / "s.bin")
    reader = store.open_stream(0)

    def child():
        ok = _refused_at_once(lambda: gpu_fs.gather(ids))
        ok = ok and _refused_at_once(lambda: gpu_fs.announce(ids))
        ok = ok and _refused_at_once(lambda: arr[torch.tensor([3])])
        ok = ok and _refused_at_once(lambda: sampler.sample(torch.tensor([0])))
        ok = ok and _refused_at_once(lambda: store.read_stream(reader, device="cuda"))
        # what lives on the host just works: the table, a host-tier store inherited or made here, stream reads
        ok = ok and torch.equal(tf[torch.arange(ROWS)], expected_rows(range(ROWS)))
        ok = ok and torch.equal(host_fs.gather(torch.arange(ROWS)), expected_rows(range(ROWS)))
        mine = gpuio.TableCache(tf, host_cache_rows=10, hot_scores=torch.arange(ROWS), device="cpu")
        ok = ok and torch.equal(mine.gather(torch.arange(ROWS)), expected_rows(range(ROWS)))
        ok = ok and store.read_stream(reader) is not None
        return 0 if ok else 3
    assert fork_and_wait(child) == 0
    assert torch.equal(gpu_fs.gather(ids).cpu(), expected_rows(ids))  # the parent's CUDA side is unaffected
    store.close()
    arr.close()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers_beside_cuda_training(tmp_path, method):
    tf = make_table(tmp_path / "t.npy")
    store = make_stream_store(tmp_path / "s.bin")
    host_fs = gpuio.TableCache(tf, gpu_cache_bytes=8 * 4096, host_cache_rows=30, hot_scores=torch.arange(ROWS),
                                 device="cpu")
    with cuda_training(tf) as gpu_fs:
        loaders = [
            torch.utils.data.DataLoader(StreamsDataset(store), batch_size=None, num_workers=2, timeout=60,
                                        multiprocessing_context=method),
            torch.utils.data.DataLoader(GatherDataset(host_fs, ROWS), batch_size=8, num_workers=2, timeout=60,
                                        multiprocessing_context=method)]
        if method == "spawn":  # a GPU cache travels to spawned workers: each rebuilds it, empty, on its own CUDA
            loaders.append(torch.utils.data.DataLoader(GatherDataset(gpu_fs, ROWS), batch_size=8, num_workers=2,
                                                       timeout=60, multiprocessing_context=method))
        assert os.getpid() not in check_streams_loader(loaders[0])
        for loader in loaders[1:]:
            assert os.getpid() not in check_loader(loader)
    assert store.check()["streams"] == STREAMS
    store.close()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_pyg_loader_samples_in_workers_and_gathers_in_the_main_process(tmp_path, method):
    from torch_geometric.loader import NodeLoader

    from gpuio_apps.data import rmat_edges
    from gpuio.graph import coalesce_undirected

    tf = make_table(tmp_path / "x.npy")
    graph = coalesce_undirected(rmat_edges(ROWS, 600, seed=5), ROWS)
    feats, gs = gpuio.pyg.PygFeatureStore(), gpuio.pyg.GraphStore()
    feats.put_tensor(gpuio.TableCache(tf, gpu_cache_bytes=8 * 4096, device="cuda"), group_name=None,
                     attr_name="x", index=None)
    gs.put_edge_index(graph, edge_type=None, layout="coo", size=(ROWS, ROWS))
    with cuda_training(tf):
        loader = NodeLoader((feats, gs), node_sampler=gpuio.pyg.NeighborSampler(gs, num_neighbors=[4, 3], seed=1),
                            input_nodes=torch.arange(ROWS), batch_size=16, num_workers=2, timeout=60,
                            multiprocessing_context=method, filter_per_worker=False)
        seeds = []
        for data in loader:
            assert data.x.is_cuda
            torch.testing.assert_close(data.x.cpu(), expected_rows(data.n_id), rtol=0, atol=0)
            seeds.append(data.n_id[:data.batch_size])
    assert torch.equal(torch.cat(seeds).sort().values, torch.arange(ROWS))
