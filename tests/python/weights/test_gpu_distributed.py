"""gpuio.safetensors' distributed load onto a GPU through a one-rank NCCL group (GPU machine; skipped without
CUDA): the single-rank path of load_file(..., process_group=) as the multi-GPU runs take it, all of a sharded
checkpoint and a slice of each tensor, bit for bit beside safetensors onto the same GPU, every tensor owning
its storage on a 256-byte boundary. The multi-rank runs are benchmarks/model_load_ranks.py's (suite weights-dist)."""
from __future__ import annotations

import json
import os
from datetime import timedelta

import pytest

torch = pytest.importorskip("torch")
sft = pytest.importorskip("safetensors.torch")
dist = pytest.importorskip("torch.distributed")

import gpuio.safetensors as gst  # noqa: E402

from gpu_util import watchdog_fixture  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")]
_watchdog = watchdog_fixture("test_gpu_distributed")


@pytest.fixture(scope="module")
def group():
    if not dist.is_nccl_available():
        pytest.skip("this torch has no NCCL")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1, timeout=timedelta(seconds=60))
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    g = torch.Generator().manual_seed(41)
    t = {f"w{i}": torch.randn(512, 257 + i, generator=g).to(torch.bfloat16 if i % 2 else torch.float32)
         for i in range(8)}
    t.update(scalar=torch.tensor(7, dtype=torch.int64), empty=torch.empty(0, 3), tail=torch.randn(99, generator=g))
    folder = str(tmp_path_factory.mktemp("gpu-dist"))
    names = sorted(t)
    shards = {names[i]: f"model-0000{1 + i % 2}-of-00002.safetensors" for i in range(len(names))}
    for f in set(shards.values()):
        sft.save_file({n: t[n] for n in names if shards[n] == f}, os.path.join(folder, f))
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": shards}, f)
    return folder, t


def _same(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.reshape(-1).view(torch.uint8),
                                                                     b.reshape(-1).view(torch.uint8))


def test_one_rank_group_loads_all_of_a_sharded_checkpoint(group, checkpoint):
    folder, ref = checkpoint
    st: dict = {}
    out = gst.load_file(folder, device="cuda", process_group=group, stats=st)
    assert set(out) == set(ref)
    for n, t in ref.items():
        assert out[n].device == torch.device("cuda", 0) and _same(out[n].cpu(), t), n
        assert t.numel() == 0 or (out[n].data_ptr() % 256 == 0
                                  and out[n].untyped_storage().nbytes() == t.numel() * t.element_size()), n
    assert st["bytes_read"] == sum(t.numel() * t.element_size() for t in ref.values()) and st["bytes_received"] == 0
    assert "cuda:0" in st["data_path"], st


def test_one_rank_group_loads_a_slice_of_each_tensor(group, checkpoint):
    folder, ref = checkpoint

    def shard(name, shape):
        if name.startswith("w"):
            return (slice(100, 300), slice(7, 200, 3))
        return None if name != "tail" else False

    out = gst.load_file(folder, device="cuda", process_group=group, shard=shard)
    expect = {n: (t if shard(n, t.shape) is None else t[shard(n, t.shape)].contiguous())
              for n, t in ref.items() if shard(n, t.shape) is not False}
    assert set(out) == set(expect)
    for n, t in expect.items():
        assert _same(out[n].cpu(), t), n
