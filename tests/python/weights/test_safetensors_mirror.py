"""gpuio.safetensors against safetensors.torch on the behaviours it mirrors: save_file refusing shared memory,
save() bytes, offset_keys, framework="np", metadata={}, tensors= on an index whose other shards are gone, the
load_file hook's bad arguments, and the DCP reader given a checkpoint that is not gpuio's."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

import gpuio.safetensors as gst

sft = pytest.importorskip("safetensors.torch")
import safetensors  # noqa: E402


def test_save_file_refuses_shared_memory_as_safetensors(tmp_path):
    w = torch.arange(16.0).reshape(4, 4)
    for tensors in ({"a": w, "b": w}, {"a": w, "b": w[1]}):
        with pytest.raises(RuntimeError, match="share memory") as ref:
            sft.save_file(tensors, str(tmp_path / "ref.safetensors"))
        with pytest.raises(RuntimeError, match=r"share memory.*\[\['a', 'b'\]\].*save_model") as got:
            gst.save_file(tensors, tmp_path / "got.safetensors")
        assert "\n" not in str(got.value) and type(got.value) is type(ref.value)
        with pytest.raises(RuntimeError, match="share memory"):
            gst.save(tensors)
    assert not (tmp_path / "got.safetensors").exists()
    gst.save_file({"a": w[:2], "b": w[2:]}, tmp_path / "views.safetensors")  # disjoint views: not shared
    got = sft.load_file(str(tmp_path / "views.safetensors"))
    assert torch.equal(got["a"], w[:2]) and torch.equal(got["b"], w[2:])


def test_save_bytes_load_in_safetensors():
    t = {"w": torch.randn(3, 5), "i": torch.arange(7, dtype=torch.int64), "h": torch.ones(2, dtype=torch.bfloat16),
         "s": torch.tensor(2.5)}
    data = gst.save(t, metadata={"k": "v"})
    assert isinstance(data, bytes)
    back = sft.load(data)
    assert back.keys() == t.keys() and all(torch.equal(back[k], t[k]) and back[k].dtype == t[k].dtype for k in t)
    got = gst.load(data)
    assert all(torch.equal(got[k], t[k]) for k in t)


def test_metadata_empty_reads_back_empty(tmp_path):
    t = {"a": torch.ones(3)}
    for meta, want in (({}, {}), (None, None), ({"x": "y"}, {"x": "y"})):
        gst.save_file(t, tmp_path / "g.safetensors", metadata=meta)
        sft.save_file(t, str(tmp_path / "s.safetensors"), metadata=meta)
        with safetensors.safe_open(str(tmp_path / "s.safetensors"), "pt") as f:
            assert f.metadata() == want
        with safetensors.safe_open(str(tmp_path / "g.safetensors"), "pt") as f:
            assert f.metadata() == want  # what gpuio wrote, read by safetensors
        for p in ("g", "s"):
            with gst.safe_open(tmp_path / f"{p}.safetensors") as f:
                assert f.metadata() == want


def test_offset_keys_as_safetensors(tmp_path):
    t = {"z": torch.ones(2, dtype=torch.int8), "a": torch.ones(8, dtype=torch.float64), "m": torch.ones(3),
         "b": torch.ones(4, dtype=torch.int16)}
    p = str(tmp_path / "s.safetensors")
    sft.save_file(t, p)
    with safetensors.safe_open(p, "pt") as f:
        want = f.offset_keys()
    with gst.safe_open(p) as f:
        assert f.offset_keys() == want and f.keys() == sorted(t)
    gst.save_file(t, tmp_path / "g.safetensors")  # largest element first: a, m, b, z
    with gst.safe_open(tmp_path / "g.safetensors") as f:
        assert f.offset_keys() == ["a", "m", "b", "z"]


def test_framework_np_as_safetensors_numpy(tmp_path):
    t = {"f": torch.randn(4, 3), "i": torch.arange(5, dtype=torch.int32), "h": torch.ones(2, dtype=torch.bfloat16)}
    p = str(tmp_path / "s.safetensors")
    sft.save_file(t, p)
    with safetensors.safe_open(p, "np") as ref, gst.safe_open(p, framework="np") as got:
        for k in ("f", "i"):
            a, b = ref.get_tensor(k), got.get_tensor(k)
            assert isinstance(b, np.ndarray) and b.dtype == a.dtype and np.array_equal(a, b)
        assert np.array_equal(got.get_slice("f")[1:3], ref.get_slice("f")[1:3])
        many = got.get_tensors(["f", "i"])
        assert all(isinstance(v, np.ndarray) for v in many.values())
        with pytest.raises(TypeError):
            ref.get_tensor("h")
        with pytest.raises(TypeError, match="'h' is torch.bfloat16, which NumPy has no dtype for"):
            got.get_tensor("h")
    with pytest.raises(ValueError, match="device='cuda' with framework='np'"):
        gst.safe_open(p, framework="np", device="cuda")


def _sharded(tmp_path, n=3):
    d = tmp_path / "ckpt"
    d.mkdir()
    shards = {f"model-{i + 1:05d}-of-{n:05d}.safetensors": {f"l{i}.w": torch.full((4, 4), float(i)),
                                                         f"l{i}.b": torch.arange(4.0) + i} for i in range(n)}
    for fname, ts in shards.items():
        gst.save_file(ts, d / fname)
    wm = {k: fname for fname, ts in shards.items() for k in ts}
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    return d, shards


def test_tensors_on_an_index_opens_only_their_shards(tmp_path):
    d, shards = _sharded(tmp_path)
    names = list(shards)
    for other in names[1:]:
        os.remove(d / other)  # this rank has only its own shard on disk
    index = d / "model.safetensors.index.json"
    st: dict = {}
    got = gst.load_file(index, tensors=["l0.w", "l0.b"], stats=st)
    assert sorted(got) == ["l0.b", "l0.w"] and torch.equal(got["l0.w"], torch.zeros(4, 4)) and st["files"] == 1
    got = gst.load_file(d, tensors=lambda n: n.startswith("l0."))
    assert sorted(got) == ["l0.b", "l0.w"]
    assert gst.load_file(index, tensors=lambda n: False) == {}
    with pytest.raises(KeyError, match="no tensor named 'nope'"):
        gst.load_file(index, tensors=["nope"])
    with pytest.raises(FileNotFoundError):  # a tensor whose shard is gone: the missing file is named
        gst.load_file(index, tensors=["l1.w"])
    with pytest.raises(FileNotFoundError):
        gst.load_file(index)


def test_load_file_shard_needs_a_process_group(tmp_path):
    gst.save_file({"a": torch.ones(2)}, tmp_path / "a.safetensors")
    with pytest.raises(ValueError, match="shard=0 needs process_group="):
        gst.load_file(tmp_path / "a.safetensors", shard=0)


def test_dcp_reader_names_a_foreign_checkpoint(tmp_path):
    dcp = pytest.importorskip("torch.distributed.checkpoint")
    sd = {"w": torch.randn(4, 4), "b": torch.arange(3.0)}
    theirs = tmp_path / "torch_dcp"
    dcp.save(sd, storage_writer=dcp.FileSystemWriter(str(theirs)))
    reader = gst.StorageReader(theirs)
    with pytest.raises(ValueError, match=r"another storage writer.*\.distcp.*FileSystemReader") as e:
        reader.read_metadata()
    assert "\n" not in str(e.value)
    with pytest.raises(BaseException, match="another storage writer"):
        dcp.load({"w": torch.empty(4, 4), "b": torch.empty(3)}, storage_reader=gst.StorageReader(theirs))
    hf = tmp_path / "hf"
    hf.mkdir()
    gst.save_file({"w": torch.ones(2)}, hf / "model.safetensors")
    with pytest.raises(FileNotFoundError, match=r"no \.metadata; not a complete checkpoint; it holds 1 entries "
                                                r"\(\.safetensors\)") as e:
        gst.StorageReader(hf).read_metadata()
    assert "\n" not in str(e.value)
    # and gpuio's own round trip still reads (a state dict with tied entries: DCP items may share memory)
    w = torch.randn(4, 4)
    ours = tmp_path / "ours"
    dcp.save({"w": w, "tied": w}, storage_writer=gst.StorageWriter(ours))
    back = {"w": torch.empty(4, 4), "tied": torch.empty(4, 4)}
    dcp.load(back, storage_reader=gst.StorageReader(ours))
    assert torch.equal(back["w"], w) and torch.equal(back["tied"], w)
