"""The paced null device (sim null_paced=1) through the engine, and the ceiling benchmark's scaling judgement:
rated figures read from the backend, the devices' own rate and Little's law named as bounds, the judged line."""
from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("gpuio._core")
import gpuio  # noqa: E402
from gpuio_apps.bench import ceiling, ceiling_scaling as scaling  # noqa: E402


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv("GPUIO_SIM", raising=False)


def _engine(n, **sim):
    return gpuio.Engine([f"sim{i}" for i in range(n)], backend="sim", workers=1, stripe_bytes=4096,
                        sim=dict(device_bytes=8 << 20, null_paced=True, **sim))


def test_paced_null_completes_produces_no_data_and_reports_its_rate():
    with _engine(2, latency_ns=50_000, link_mb_s=1600) as e:
        out = np.full((8, 4096), 9, dtype=np.uint8)
        t0 = time.perf_counter()
        e.read(np.arange(8), out)
        assert time.perf_counter() - t0 >= 50e-6  # no read before its latency
        assert (out == 9).all()  # no data produced
        s = e.stats()
        r = scaling.rated(s["backend"])
        assert r == dict(latency_us=50.0, link_mb_s=1600, iops=1600e6 / 4096)
        assert s["device_wait_seconds"] >= 0 and s["ops"] > 0
    with gpuio.Engine(["sim0"], backend="sim", sim=dict(device_bytes=8 << 20, null=True)) as e:
        s = e.stats()  # the zero-latency null device (paced is on by default) keeps no rate
        assert "null=on(no model, no data)" in s["backend"] and scaling.rated(s["backend"]) is None


def test_devices_serve_every_read_no_faster_than_their_rate():
    """4 devices of ~10 K reads/s each (100 us per 4 KiB): 400 reads spread evenly take at least one device's 100
    reads' link time (the model's lower bound: a loaded box can only make it longer) and each read is served once.
    How close the devices come to serving in parallel is a rate, judged by benchmarks/engine_ceiling.py (its
    JUDGED scaling line) and benchmarks/sim_scaling.py, not asserted here."""
    n, per, mb_s = 4, 100, 41
    s = 4096 / mb_s * 1e-6
    with _engine(n, latency_ns=1000, link_mb_s=mb_s) as e:
        ids = np.arange(n * per)  # blocks are striped over the devices one by one: per reads on each
        out = np.empty((n * per, 4096), dtype=np.uint8)
        e.read(ids[:n], out[:n])
        ops0 = e.stats()["ops"]
        t0 = time.perf_counter()
        e.read(ids, out)
        took = time.perf_counter() - t0
        ops = e.stats()["ops"] - ops0
    assert took >= (per - 1) * s
    assert ops == n * per


@pytest.mark.parametrize("sim,match", [
    (dict(null_paced=False, null=True, latency_ns=5000), "paced null device only"),
    (dict(paced=False), "paced=0 .free-running. contradicts it"),
    (dict(latency_ns=2 * 10**9), "latency_ns=2000000000 must be <="),
])
def test_bad_options_one_clear_line(sim, match):
    kw = dict(device_bytes=8 << 20, null_paced=True)
    kw.update(sim)
    with pytest.raises(ValueError, match=match) as ex:
        gpuio.Engine(["sim0"], backend="sim", sim=kw)
    assert "\n" not in str(ex.value)


def _row(n, iops, **kw):
    r = dict(kind="paced-null", dest="host", staging="-", devices=n, workers=2, workers_active=2, iops=iops,
             rated=dict(latency_us=10.0, link_mb_s=4096, iops=1e6), inflight=2, batch=16384, queue_depth=512,
             seconds=1.0, cores_busy=1.0, runq_wait=0.0, worker_busy=2.0, device_wait=1.8, submit_frac=0.1,
             stage_us=dict(submit=0.1, prepare=0.1, io=0.1, device=0.0, wait=1.0, handle=0.1, signal=0.0, copy=0.0),
             staging_waits_per_op=0.0, copy_mode="", staging_mode="", copy_kib=0)
    r.update(kw)
    return r


def test_bounds_named_for_rated_devices():
    # at >= 97 % of N x the rated rate the devices are the bound, whatever else is busy; at >= 90 % unless a host
    # resource is named first
    assert ceiling.name_bound(_row(4, 3.9e6, device_wait=0.0), 16).startswith("the devices' own rate: 98% of N x 1.000")
    assert ceiling.name_bound(_row(4, 3.8e6), 16).startswith("the devices' own rate: 95% of N x 1.000 M IOPS")
    assert ceiling.name_bound(_row(4, 3.8e6, device_wait=0.0), 16).startswith("worker cores: ")
    # below it, workers that mostly wait for the devices are not "busy": Little's law names too little depth
    r = _row(8, 2e6, inflight=1, batch=64)
    assert scaling.outstanding_max(r) == 64 and scaling.depth_needed(r) == pytest.approx(80)
    assert ceiling.name_bound(r, 16).startswith("depth: at most 64 reads outstanding")
    # enough depth and idle workers: not saturated, the busy share excluding the device wait
    assert ceiling.name_bound(_row(8, 2e6), 16).startswith("not saturated (workers 10% busy")
    # workers busy with their own work (no device wait): the worker cores, by their largest stage
    b = ceiling.name_bound(_row(8, 2e6, device_wait=0.0, stage_us=dict(_row(1, 1)["stage_us"], handle=0.5)), 16)
    assert b.startswith("worker cores: completion handling")


def test_pcie_named_for_gpu_destination_near_the_measured_copy_rate():
    r = _row(12, 5e6, rated=None, dest="gpu", gbps=44.0, pcie_gbps=50.0)
    assert ceiling.name_bound(r, 16).startswith("PCIe host->GPU copies: 44.0 GB/s = 88% of the 50.0 GB/s")
    assert not ceiling.name_bound(dict(r, gbps=40.0), 16).startswith("PCIe")
    assert not ceiling.name_bound(dict(r, dest="host"), 16).startswith("PCIe")
    assert not ceiling.name_bound(dict(r, pcie_gbps=None), 16).startswith("PCIe")


def test_judged_scaling_names_the_bound_where_efficiency_drops():
    rows, lines = [], []
    for n, eff, w in ((1, 1.0, 1), (4, 0.97, 2), (8, 0.8, 6), (8, 0.7, 8), (12, 0.6, 6)):
        rows.append(_row(n, eff * n * 1e6, workers=w, efficiency=eff, bound=f"bound at {n}"))
    rows.append(dict(_row(8, 7.5e6, workers=4), kind="null", rated=None, efficiency=0.9, bound="-"))
    (x,) = scaling.judged_scaling(rows, lines.append, w_max=6)
    assert x["first_below"] == 8 and x["met_up_to"] == 4 and x["bound"] == "bound at 8"
    assert x["efficiency"] == {1: 1.0, 4: 0.97, 8: 0.8, 12: 0.6} and x["null_iops"] == 7.5e6
    assert "below 0.9 from N=8; bound named there: bound at 8; null devices at N=8: 7.50 M" in lines[0]
    ok = [dict(r, efficiency=1.0) for r in rows if r["kind"] == "paced-null"]
    (y,) = scaling.judged_scaling(ok, lines.append)
    assert y["first_below"] is None and y["met_up_to"] == 12 and "at every N up to 12: met" in lines[1]
