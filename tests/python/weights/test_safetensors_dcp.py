"""torch.distributed.checkpoint through gpuio.safetensors' StorageWriter/StorageReader, on the CPU: with no
process group and with a single-process gloo group; every tensor and object restored, the rank file a
standard safetensors file, an unfinished checkpoint (no .metadata) refused."""
from __future__ import annotations

import os
import socket

import pytest
import torch

import gpuio.safetensors as gst

dcp = pytest.importorskip("torch.distributed.checkpoint")
dist = pytest.importorskip("torch.distributed")


def _state(seed: int) -> dict:
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 3))
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    m(torch.randn(4, 10)).sum().backward()
    opt.step()
    return {"model": m.state_dict(), "optim": opt.state_dict(), "step": seed, "note": f"run {seed}",
            "bf16": torch.randn(7, 5).bfloat16(), "empty": torch.empty(0, 3)}


def _flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat(v, key + "."))
        elif isinstance(v, list):
            out.update(_flat(dict(enumerate(v)), key + "."))
        else:
            out[key] = v
    return out


def _equal(a: dict, b: dict) -> None:
    fa, fb = _flat(a), _flat(b)
    assert fa.keys() == fb.keys()
    for k in fa:
        if isinstance(fa[k], torch.Tensor):
            assert fa[k].dtype == fb[k].dtype and torch.equal(fa[k], fb[k]), k
        else:
            assert fa[k] == fb[k], k


def _round_trip(path) -> None:
    saved = _state(1)
    dcp.save(saved, storage_writer=gst.StorageWriter(path))
    target = _state(2)  # same structure, other values
    dcp.load(target, storage_reader=gst.StorageReader(path))
    _equal(saved, target)
    files = sorted(os.listdir(path))
    assert files == [".metadata", "__0_0.safetensors"]
    import safetensors.torch as sft

    plain = sft.load_file(os.path.join(path, "__0_0.safetensors"))  # a standard file, named by the state's keys
    assert torch.equal(plain["model.0.weight"], saved["model"]["0.weight"])


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_dcp_without_a_process_group(tmp_path):
    pytest.importorskip("safetensors")
    _round_trip(str(tmp_path / "ckpt"))


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_dcp_single_process_gloo_group(tmp_path):
    pytest.importorskip("safetensors")
    if not dist.is_available():
        pytest.skip("torch.distributed is not available in this torch")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        _round_trip(str(tmp_path / "ckpt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_dcp_refuses_an_unfinished_checkpoint(tmp_path):
    path = tmp_path / "ckpt"
    dcp.save(_state(1), storage_writer=gst.StorageWriter(path))
    os.unlink(path / ".metadata")
    with pytest.raises(BaseException) as e:  # DCP wraps the reader's error with every rank's traceback
        dcp.load(_state(2), storage_reader=gst.StorageReader(path))
    assert "no .metadata; not a complete checkpoint" in str(e.value) + repr(e.value.__dict__)
    with pytest.raises(FileNotFoundError, match="not a complete checkpoint"):
        gst.StorageReader(path).read_metadata()
    dcp.save(_state(1), storage_writer=gst.StorageWriter(path))
    with pytest.raises(BaseException) as e:  # CheckpointException is a BaseException
        dcp.save(_state(1), storage_writer=gst.StorageWriter(path, overwrite=False))
    assert "already holds a checkpoint and overwrite=False" in str(e.value) + repr(e.value.__dict__)
