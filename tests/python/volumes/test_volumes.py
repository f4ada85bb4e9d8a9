"""Volumes on a real Ceph cluster (the session's ceph_cluster): the rbd backend under gpuio.Engine, volume
management, block -> object -> OSD mapping, TensorFiles on volumes, and the CLI."""
from __future__ import annotations

import errno
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import gpuio
from gpuio import volumes
from volumes_util import admin, fresh, pattern


# The command line of this interpreter's gpuio (the same code as the installed `gpuio` script).
GPUIO = [sys.executable, "-c", "from gpuio_apps.cli import main; main()"]


def test_create_list_info_resize_delete(ceph_cluster):
    who = admin(ceph_cluster)
    v = volumes.create(fresh(namespace="mgmt"), 8 << 20, object_size=1 << 20, who=who)
    pool, ns, image = volumes.parts(v)
    assert (pool, ns) == ("rbd", "mgmt")
    listed = {x["name"]: x for x in volumes.list("rbd", "mgmt", who=who)}
    assert listed[v]["size"] == 8 << 20 and listed[v]["object_size"] == 1 << 20
    with pytest.raises(FileExistsError, match=image):
        volumes.create(v, 8 << 20, who=who)
    volumes.resize(v, 24 << 20, who=who)
    i = volumes.info(v, who=who)
    assert i["size"] == 24 << 20 and i["object_prefix"].startswith("rbd_data.") and i["lock_owners"] == []
    volumes.delete(v, who=who)
    assert v not in {x["name"] for x in volumes.list("rbd", "mgmt", who=who)}
    with pytest.raises(FileNotFoundError, match=image):
        volumes.delete(v, who=who)


def test_bad_names_and_sizes_are_named():
    with pytest.raises(ValueError, match="rbd:a/b/c/d"):
        volumes.spec("rbd:a/b/c/d")
    with pytest.raises(ValueError, match="size"):
        volumes.create("rbd/x", 0)
    with pytest.raises(ValueError, match="already names its pool"):
        volumes.spec("p/img", pool="q")
    assert volumes.spec("img", namespace="ns") == "rbd:rbd/ns/img"


def test_engine_roundtrip_random_order_and_data_path(ceph_cluster):
    who = admin(ceph_cluster)
    v = volumes.create(fresh(), 4 << 20, who=who)
    with volumes.open(v, "r+", who=who) as eng:
        n = eng.total_blocks
        assert n == (4 << 20) // 4096
        blocks = np.random.default_rng(3).permutation(n)
        eng.write(blocks, pattern(3, blocks))
        eng.sync()
        probe = np.random.default_rng(4).integers(0, n, 500)
        out = np.empty(len(probe) * 4096, np.uint8)
        eng.read(probe, out)
        assert np.array_equal(out, pattern(3, probe))
        s = eng.stats()
        assert s["data_path"] == "rbd+direct" and s["bytes_staged"] == 0
        assert "rbd client.admin" in s["backend"] and "lock=exclusive" in s["backend"]
    # a reader sees the writes (read-only: no lock), unaligned host memory straight from librbd
    with volumes.open(v, "r", who=who) as eng:
        raw = np.empty(3 * 4096 + 1, np.uint8)[1:]
        eng.read([7, 8, 9], raw)
        assert np.array_equal(raw, pattern(3, [7, 8, 9]))
        assert "lock=none(read-only)" in eng.stats()["backend"]


def test_batches_in_flight_go_caller_to_librbd_and_refill_as_each_ends(ceph_cluster):
    # host batches skip the engine's workers on rbd: the caller issues, librbd's thread finishes them
    who = admin(ceph_cluster)
    v = volumes.create(fresh(), 2 << 20, who=who)
    with volumes.open(v, "r+", who=who) as eng:
        n = eng.total_blocks
        eng.write(np.arange(n), pattern(5, np.arange(n)))
    with volumes.open(v, "r", who=who, workers=1) as eng:
        rng = np.random.default_rng(6)
        ids = [rng.integers(0, n, 8) for _ in range(4)]
        outs = [np.empty(8 * 4096, np.uint8) for _ in range(4)]
        hs = [eng.read_async(ids[i], outs[i]) for i in range(4)]
        for _ in range(40):  # keep 4 batches in flight, refilling whichever ends first
            k = eng.wait_any(hs)
            hs[k].wait()
            assert np.array_equal(outs[k], pattern(5, ids[k]))
            ids[k] = rng.integers(0, n, 8)
            hs[k] = eng.read_async(ids[k], outs[k])
        for k in range(4):
            hs[k].wait()
            assert np.array_equal(outs[k], pattern(5, ids[k]))
        s = eng.stats()
        assert s["bytes"] == 44 * 8 * 4096 and s["caller_submitted_ops"] == s["ops"] > 0
        assert s["block_waits"] == 0 and s["data_path"] == "rbd+direct"


def test_large_batches_keep_queue_depth_with_librbd(ceph_cluster):
    # queue_depth is the depth held with librbd (like fio's iodepth): a batch larger than it waits in the
    # engine and each completion issues the next request; every block still lands in its own slot
    who = admin(ceph_cluster)
    v = volumes.create(fresh(), 1 << 20, who=who)
    with volumes.open(v, "r+", who=who) as eng:
        n = eng.total_blocks
        eng.write(np.arange(n), pattern(9, np.arange(n)))
    with volumes.open(v, "r", who=who, workers=1, queue_depth=4, io_bytes_max=4096) as eng:
        rng = np.random.default_rng(9)
        ids = [rng.permutation(n)[:100] for _ in range(2)]
        outs = [np.empty(100 * 4096, np.uint8) for _ in range(2)]
        hs = [eng.read_async(ids[i], outs[i]) for i in range(2)]
        for k in range(2):
            hs[k].wait()
            assert np.array_equal(outs[k], pattern(9, ids[k]))
        s = eng.stats()
        assert s["ops"] == s["caller_submitted_ops"] == 200
        assert s["caller_inflight_max"] == 4 and s["caller_queued_ops"] == 196


def test_two_volumes_striped_and_engine_rbd_options(ceph_cluster):
    who = admin(ceph_cluster)
    a, b = volumes.create(fresh(), 1 << 20, who=who), volumes.create(fresh(), 1 << 20, who=who)
    with gpuio.Engine([a, b], backend="rbd", stripe_bytes=65536, rbd=who.rbd_options()) as eng:
        assert eng.total_blocks == 512
        eng.write(np.arange(512), pattern(9, range(512)))
        out = np.empty(512 * 4096, np.uint8)
        eng.read(np.arange(512), out)
        assert np.array_equal(out, pattern(9, range(512)))
    with gpuio.Engine(a, rbd=who.rbd_options(), writable=False) as eng:  # "rbd:" paths pick the rbd backend
        assert eng.stats()["data_path"] == "rbd+direct"
    with pytest.raises(ValueError, match="unknown rbd option"):
        gpuio.Engine(a, backend="rbd", rbd=dict(conff="x"))


def test_errors_carry_errno_volume_and_block(ceph_cluster):
    who = admin(ceph_cluster)
    v = volumes.create(fresh(), 1 << 20, who=who)
    with volumes.open(v, "r", who=who) as eng:  # read-only: librbd refuses the write (EROFS)
        with pytest.raises(OSError) as e:
            eng.write([5], np.zeros(4096, np.uint8))
    assert e.value.errno == errno.EROFS
    assert v in str(e.value) and "block 5" in str(e.value)
    with pytest.raises(FileNotFoundError, match="nosuch"):
        volumes.open("rbd/nosuch", who=who)


def test_map_names_object_pg_and_acting_osds(ceph_cluster):
    who = admin(ceph_cluster)
    v = volumes.create(fresh(namespace="maps"), 16 << 20, object_size=4 << 20, who=who)
    m = volumes.map(v, 2500, who=who)  # byte 10240000 -> object 2 at offset 1851392
    assert m["object_number"] == 2 and m["object_offset"] == 2500 * 4096 - 2 * (4 << 20)
    assert m["object"] == volumes.info(v, who=who)["object_prefix"] + ".0000000000000002"
    pools = {p["pool_name"]: p["pool_id"] for p in ceph_cluster.mon({"prefix": "osd pool ls", "detail": "detail"})}
    assert m["namespace"] == "maps" and m["pg"].startswith(f"{pools['rbd']}.")
    assert len(m["acting"]) == 2 and set(m["acting"]) <= set(ceph_cluster.osds) and m["primary"] == m["acting"][0]
    with pytest.raises(IndexError, match="beyond"):
        volumes.map(v, 4096, who=who)


def test_bfloat16_tensor_file_on_a_volume(ceph_cluster):
    """A bfloat16 table on a volume: the same header (uint16 words, named bfloat16) and bit-exact rows."""
    who = admin(ceph_cluster)
    name = fresh()
    bits = torch.from_numpy(np.random.default_rng(2).integers(-32768, 32768, (500, 24), dtype=np.int16))
    tf = volumes.create_tensor(name, (500, 24), torch.bfloat16, who=who)
    tf[:] = bits.view(torch.bfloat16)
    tf.close()
    ro = volumes.open_tensor(name, "r", who=who)
    assert ro.torch_dtype == torch.bfloat16 and ro.dtype == np.uint16
    assert torch.equal(ro[torch.tensor([7, 499, 7])].view(torch.int16), bits[[7, 499, 7]])
    ro.close()


def test_tensor_file_gather_scatter_on_a_volume(ceph_cluster):
    who = admin(ceph_cluster)
    name = fresh()
    rows = torch.arange(1000 * 24, dtype=torch.float32).reshape(1000, 24)
    tf = volumes.create_tensor(name, (1000, 24), "float32", who=who)
    idx = torch.randperm(1000, generator=torch.Generator().manual_seed(0))[:300]
    tf.scatter(idx, rows[idx])
    assert torch.equal(tf.gather(idx), rows[idx])
    assert tf.engine.stats()["data_path"] == "rbd+direct"
    tf.close()
    ro = volumes.open_tensor(name, "r", who=who)
    assert ro.shape == (1000, 24) and ro.dtype == np.float32
    got = ro.gather(torch.tensor([int(idx[0]), int(idx[1]), int(idx[0])]))
    assert torch.equal(got, rows[[int(idx[0]), int(idx[1]), int(idx[0])]])
    untouched = sorted(set(range(1000)) - set(idx.tolist()))[:5]
    assert torch.count_nonzero(ro.gather(torch.tensor(untouched))) == 0
    # the caches above the tensor store, unchanged: a TableCache on the volume's TensorFile
    expect = torch.zeros(1000, 24)
    expect[idx] = rows[idx]
    fs = gpuio.TableCache(ro, gpu_cache_bytes=8 * 4096, host_cache_rows=50, hot_scores=torch.rand(1000),
                            device="cpu")
    q = torch.randint(0, 1000, (200,), generator=torch.Generator().manual_seed(1))
    assert torch.equal(fs.gather(q), expect[q])
    ro.close()


def test_cli_volume_and_cluster_commands(ceph_cluster):
    env = ceph_cluster.env()
    v = fresh()
    run = lambda *a: subprocess.run(GPUIO + list(a), capture_output=True, text=True, env=env, timeout=120)  # noqa: E731
    r = run("volume", "create", v, "8M")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "rbd:" + v
    r = run("volume", "map", v, "1500", "--json")
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m["object"].endswith(".0000000000000001") and len(m["acting"]) == 2
    r = run("volume", "list")
    assert "rbd:" + v in r.stdout
    r = run("cluster", "status", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["osds_up"] == len(ceph_cluster.osds)
    assert run("volume", "delete", v).returncode == 0
    r = run("volume", "delete", v)
    # a failure the cluster reports: one line, exit 1 (exit 2 is for bad input, refused before any work)
    assert r.returncode == 1 and v.split("/")[-1] in r.stderr and "ENOENT" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("gpuio: error: "), r.stderr


def test_a_shrink_is_refused_naming_the_bytes_lost_unless_allowed():
    volumes.check_resize("rbd:rbd/v", 2 << 20, 4 << 20)  # growing loses nothing
    volumes.check_resize("rbd:rbd/v", 2 << 20, 2 << 20)
    volumes.check_resize("rbd:rbd/v", 2 << 20, 1 << 20, allow_shrink=True)
    with pytest.raises(volumes.ShrinkRefused, match=r"rbd:rbd/v holds 2097152 bytes.*drop its last 1048576 bytes"):
        volumes.check_resize("rbd:rbd/v", 2 << 20, 1 << 20)


def test_cli_resize_keeps_the_data_past_a_shrink_unless_allowed(ceph_cluster):
    who, env, v = admin(ceph_cluster), ceph_cluster.env(), fresh()
    volumes.create(v, 2 << 20, object_size=1 << 20, who=who)
    tail = (2 << 20) // 4096 - 1  # the last block, past the 1 MiB the shrink would keep
    with volumes.open(v, "r+", who=who) as eng:
        eng.write(np.array([tail]), pattern(5, [tail]))
        eng.sync()
    run = lambda *a: subprocess.run(GPUIO + ["volume", "resize", v, *a], capture_output=True, text=True,  # noqa: E731
                                    env=env, timeout=120)
    r = run("1M")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "SIZE '1M'" in r.stderr and "1048576 bytes" in r.stderr and "--allow-shrink" in r.stderr, r.stderr
    with pytest.raises(volumes.ShrinkRefused):
        volumes.resize(v, 1 << 20, who=who)
    assert volumes.info(v, who=who)["size"] == 2 << 20
    with volumes.open(v, "r", who=who) as eng:
        out = np.empty(4096, np.uint8)
        eng.read([tail], out)
        assert np.array_equal(out, pattern(5, [tail]))
    assert run("3M").returncode == 0 and volumes.info(v, who=who)["size"] == 3 << 20
    r = run("1M", "--allow-shrink")
    assert r.returncode == 0, r.stderr
    assert volumes.info(v, who=who)["size"] == 1 << 20
    volumes.delete(v, who=who)


def test_info_reports_rbd_support():
    from gpuio import _core, sysinfo

    report = sysinfo.info()["rbd_backend"]
    if not _core.rbd_built:
        assert report.startswith("volumes are unavailable: this gpuio was built without the rbd backend")
    else:  # built here with the Ceph libraries installed (tests/python/volumes/test_volumes_plugin.py hides them)
        assert report == "available"
