"""The applications on a Ceph volume (issue 11/12: "a volume as their store as easily as a file", one
option): the store pair over rbd:POOL/IMAGE on the session cluster, CPU, tiny sizes."""
import numpy as np
import pytest
import torch

from gpuio import volumes
from gpuio.apps import common, vecadd
from gpuio.apps.store import PosixStore, Store

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
