"""The applications on a Ceph volume (a volume is their store as easily as a file, one
option): the store pair over rbd:POOL/IMAGE on the session cluster, CPU, tiny sizes."""
import numpy as np
import pytest
import torch

from gpuio import volumes
from gpuio_apps.papers import common, vecadd
from gpuio_apps.papers.store import PosixStore, Store

from volumes_util import admin, fresh


@pytest.fixture
def conf(ceph_cluster, monkeypatch):
    monkeypatch.setenv("CEPH_CONF", ceph_cluster.conf)  # the rbd tool's default cluster, as the apps take it
    return ceph_cluster.conf


def test_store_and_basic_baseline_agree_on_raid0_of_volumes(conf, ceph_cluster):
    paths = ["rbd:" + fresh("ap"), "rbd:" + fresh("ap")]
    data = torch.from_numpy(np.random.default_rng(3).integers(0, 256, 1 << 20, dtype=np.uint8))
    try:
        with Store(paths, 2 << 20) as g, PosixStore(paths, 2 << 20) as p:
            assert g.created == paths and p.kind == "librbd-sync"
            e, e2 = common.alloc_both(g, p, "x", 1 << 20), common.alloc_both(g, p, "y", 1 << 20)
            g.write(e, 0, data)                      # engine striping over the two volumes ...
            out = torch.empty_like(data)
            p.read(e, 0, out)                        # ... read back by Basic with its own stripe map
            assert torch.equal(out, data)
            p.write(e2, 8192, data[:65536])          # the baseline writes while the engine has them open
            out2 = torch.empty(65536, dtype=torch.uint8)
            g.read(e2, 8192, out2)
            assert torch.equal(out2, data[:65536])
            assert "rbd" in g.data_path() and p.data_path() == "rbd_read/rbd_write+copy"
    finally:
        for v in paths:
            volumes.delete(v, who=admin(ceph_cluster))


def test_vecadd_runs_on_a_volume_and_removes_only_what_it_created(conf, ceph_cluster):
    v = "rbd:" + fresh("vecadd")
    r = vecadd.run("tiny", store=v, device="cpu", raw_seconds=0)
    assert r["check"].startswith("ok"), r["check"]
    assert "rbd" in r["data_path"] and r["baseline"].startswith("Basic")
    assert all(x["name"] != v for x in volumes.list(who=admin(ceph_cluster)))  # created by the run: deleted
    keep = "rbd:" + fresh("vecadd")
    volumes.create(keep, 1 << 20, who=admin(ceph_cluster))  # exists and is too small: grown, then kept
    try:
        r = vecadd.run("tiny", store=keep, device="cpu", raw_seconds=0)
        assert r["check"].startswith("ok")
        assert volumes.info(keep, who=admin(ceph_cluster))["size"] >= 3 * (1 << 18) * 8
    finally:
        volumes.delete(keep, who=admin(ceph_cluster))


def test_mixing_volumes_and_files_is_refused(conf, tmp_path):
    with pytest.raises(ValueError, match="mixes volumes"):
        Store(["rbd:rbd/x", str(tmp_path / "f.bin")], 1 << 20)


def test_gpt2_checkpoint_on_a_volume_is_a_safetensors_file(conf, ceph_cluster, capsys):
    pytest.importorskip("transformers")
    pytest.importorskip("safetensors")
    from gpuio_apps.papers import gpt2

    v = "rbd:" + fresh("gpt2")
    r = gpt2.run("tiny", store=v, device="cpu")
    assert r["check"].startswith("ok") and "safetensors.torch.load reads the volume" in r["check"], r["check"]
    assert r["baseline"] == "Basic (rbd_read/rbd_write+copy)" and r["save_basic_s"] > 0 and r["load_vs_basic"] > 0
    assert "save_torch_s" not in r and "save_of_raw" not in r
    assert all(x["name"] != v for x in volumes.list(who=admin(ceph_cluster)))  # created by the run: deleted
    assert gpt2.main(["--store", v, "--device", "cpu"]) == 0  # the command line: one option
    assert "save/load vs basic" in capsys.readouterr().out


def test_checkpoint_length_and_bytes_come_from_the_volume(conf, ceph_cluster):
    sft = pytest.importorskip("safetensors.torch")
    from gpuio_apps.papers import checkpoint

    v = "rbd:" + fresh("ckpt")
    state = {"w": torch.arange(3000, dtype=torch.float32).reshape(30, 100), "b": torch.arange(7, dtype=torch.int16)}
    header, entries, data = checkpoint.layout(state, {"k": "v"})
    total = len(header) + data
    try:
        with Store(v, 1 << 20) as g:
            ext = g.alloc("c", 1 << 20)
            g.write(ext, 0, torch.full((1 << 20,), 0xAB, dtype=torch.uint8))  # stale bytes past the end
            checkpoint.save(g, ext, header, entries, torch.device("cpu"))
            assert checkpoint.stored_length(g, ext) == total and len(header) % 4096 == 0
            got = sft.load(checkpoint.read_bytes(g, ext, total))
            assert got.keys() == state.keys() and all(torch.equal(got[k], state[k]) for k in state)
            with pytest.raises(IndexError, match="outside extent"):
                checkpoint.read_bytes(g, ext, (1 << 20) + 1)
            g.write(ext, 0, torch.full((4096,), 0xFF, dtype=torch.uint8))  # no header: length past the extent
            with pytest.raises(ValueError, match="does not start with a checkpoint"):
                checkpoint.stored_length(g, ext)
    finally:
        volumes.delete(v, who=admin(ceph_cluster))


def test_graph_on_volumes_cpu_matches_scipy(conf, ceph_cluster, tmp_path):
    pytest.importorskip("scipy")
    from gpuio_apps.papers.graph_analytics import (bfs, choose_root, connected_components, copy_to_volumes,
                                                   generate_kronecker, make_source, scipy_reference, sssp, validate_bfs)

    g = generate_kronecker(tmp_path / "g", scale=7, edgefactor=4, seed=5)
    vol = "rbd:" + fresh("csr")
    gv = copy_to_volumes(g, tmp_path / "gv", vol)
    try:
        assert gv.on_volume and gv.col_path == vol + "-col" and not (tmp_path / "gv" / "col.npy").exists()
        root = choose_root(g, 2)
        ref = scipy_reference(g, root)  # from the files
        np.testing.assert_array_equal(gv.edges("weight"), g.edges("weight"))
        rp = torch.from_numpy(gv.row_ptr)
        for name in ("gpuio-array", "gpuio-gather"):
            src = make_source(name, gv, "cpu", cache_bytes=1 << 16, page_bytes=16384)  # pages of 4 blocks
            try:
                level, parent, st = bfs(rp, src, root, max_edges=300)
                assert st["rounds"] >= 2
                np.testing.assert_array_equal(level.numpy(), ref["level"])
                assert validate_bfs(gv, root, level, parent) == []
                labels, _ = connected_components(rp, src, max_edges=300)
                np.testing.assert_array_equal(labels.numpy(), ref["labels"])
                dist, _ = sssp(rp, src, root, max_edges=300)
                d = dist.double().numpy()
                np.testing.assert_array_equal(np.isinf(d), np.isinf(ref["dist"]))
                np.testing.assert_allclose(d[~np.isinf(d)], ref["dist"][~np.isinf(d)], rtol=1e-5)
                if name == "gpuio-array":
                    assert src.stats()["col_misses"] > 0  # the pages came from the volume
            finally:
                src.close()
        with pytest.raises(ValueError, match="reads files"):
            make_source("pread+copy", gv, "cpu")
        col = volumes.info(gv.col_path, who=admin(ceph_cluster))["size"]
        assert col % 16384 == 4096 and col >= 4096 + g.num_edges * 4  # grown to whole pages after the header
    finally:
        for a in ("col", "weight"):
            volumes.delete(f"{vol}-{a}", who=admin(ceph_cluster))


def test_a_device_array_runs_over_a_volume_tensorfile(conf, ceph_cluster):
    """The volume layer opens the TensorFile (gpuio.volumes.open_tensor: the tensor layer knows files only);
    a DeviceArray over it reads and writes the volume."""
    from gpuio import DeviceArray

    v = "rbd:" + fresh("tf")
    volumes.create(v, 8192, who=admin(ceph_cluster))
    try:
        with pytest.raises(ValueError, match="holds no TensorFile"):
            volumes.open_tensor(v)  # zeros: no .npy header
    finally:
        volumes.delete(v, who=admin(ceph_cluster))
    v = "rbd:" + fresh("tf")
    volumes.create_tensor(v, (3000,), "int32").close()
    try:
        with DeviceArray(volumes.open_tensor(v, "r+"), 1 << 16, device="cpu") as a:
            a[torch.tensor([0, 1, 2999])] = torch.tensor([7, 5, 9], dtype=torch.int32)
            assert a[torch.tensor([0, 1, 2])].tolist() == [7, 5, 0]
        with volumes.open_tensor(v) as tf:
            assert tf.shape == (3000,) and tf[[0, 1, 2999]].tolist() == [7, 5, 9]  # flushed to the volume
    finally:
        volumes.delete(v, who=admin(ceph_cluster))


def test_graph_bench_tiny_on_a_volume(conf, ceph_cluster, tmp_path, capsys):
    from repo_scripts import load_script

    v = "rbd:" + fresh("gb")
    r = load_script("benchmarks/graph_bench.py").main(["--tiny", "--device", "cpu", "--data-dir",
                                                      str(tmp_path / "g"), "--volume", v, "--algos", "bfs,sssp"])
    assert [x["source"] for x in r["rows"]][:3] == ["gpuio-array", "gpuio-gather", "in-memory"]
    assert all("scipy ok" in x["check"] for x in r["rows"]), [x["check"] for x in r["rows"]]
    assert r["graph"]["arrays"]["col"] == v + "-col"
    names = {x["name"] for x in volumes.list(who=admin(ceph_cluster))}
    assert v + "-col" not in names and v + "-weight" not in names  # deleted at the end
