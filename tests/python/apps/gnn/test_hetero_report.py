"""gpuio_apps.gnn.hetero_report (the judged lines, time caps, budgets) and the pieces the one-call GPU
run relies on: a shared host buffer reads the constant tier once, load_only stops at its deadline."""
from __future__ import annotations

import time

import pytest
import torch

from gpuio_apps.gnn.hetero_report import (at, cap_for, judged_lines, pace, parse_caps, plan_caps, projected, warm_steps)


def test_parse_caps_accepts_numbers_and_labels():
    assert parse_caps("") == {} and parse_caps(0) == {"*": 0.0}
    assert parse_caps("150") == {"*": 150.0}
    caps = parse_caps("gpuio/file=120, mmap=50,load=90,*=30")
    assert caps == {"gpuio/file": 120.0, "mmap": 50.0, "load": 90.0, "*": 30.0}
    assert cap_for(caps, "gpuio/file", "gpuio") == 120.0
    assert cap_for(caps, "gpuio/memory", "gpuio") == 30.0  # neither label: the rest
    assert cap_for(caps, "mmap/file", "mmap") == 50.0
    assert cap_for({}, "mmap") == 0.0


@pytest.mark.parametrize("spec, why", [("disk=3", "unknown"), ("mmap=x", "number"), ("mmap=-1", "lie in"),
                                       ("mmap=1,mmap=2", "twice")])
def test_parse_caps_rejects_bad_specs(spec, why):
    with pytest.raises(ValueError, match=why):
        parse_caps(spec)


def test_plan_caps_scales_to_the_budget_and_never_exceeds_a_cap():
    assert plan_caps([100, 50], None) == [100, 50]
    assert plan_caps([100, 50], 1000, overhead=10) == [100, 50]  # fits: unchanged
    got = plan_caps([100, 50], 95, overhead=10)  # room 75 for 150 s of caps: half each
    assert got == pytest.approx([50, 25])
    assert plan_caps([100, 50], 10, overhead=10, floor=5) == [5, 5]  # no room: the floor
    assert plan_caps([100, 2], 10, overhead=10, floor=5) == [5, 2]  # the floor never raises a cap
    # an uncapped run gets what the capped ones leave
    assert plan_caps([0, 50], 200, overhead=10) == pytest.approx([130, 50])


def _run(backend, structure, ends, cfg_steps=100, **extra):
    r = dict(backend=backend, structure=structure, label=f"{backend}/{structure}", steps=len(ends),
             run_s=ends[-1], step_end_s=list(ends), losses=[1.0] * len(ends), structure_bytes=0,
             capped=len(ends) < cfg_steps, cfg_steps=cfg_steps)
    r.update(extra)
    return r


def test_step_arithmetic_and_projection():
    r = _run("mmap", "file", [10.0, 15.0, 20.0, 25.0])  # 10 s first step, then 5 s a step
    assert at(r, 0) == 0 and at(r, 2) == 15.0 and pace(r, 1, 4) == 5.0
    assert warm_steps(4, -1) == 1 and warm_steps(4, 10) == 3 and warm_steps(1, -1) == 0
    t, measured = projected(r, 10, warmup=-1)
    assert not measured and t == pytest.approx(25.0 + 6 * 5.0)
    assert projected(r, 3, warmup=-1) == (20.0, True)


INFO = dict(steps=8, warmup=-1, feature_bytes=25.6e9, num_edges=109e6, limit=12 * 2**30, struct_cache_mb=448,
            structure_file_bytes=935 << 20)


def test_judged_mmap_line_extrapolates_a_capped_mmap_run_and_states_it():
    gp = _run("gpuio", "file", [1.0 * (i + 1) for i in range(8)], cfg_steps=8)  # 1 s a step, 8 steps
    mm = _run("mmap", "file", [6.0, 10.0, 14.0, 18.0], cfg_steps=8)  # capped at 4 steps, then 4 s a step
    lines = judged_lines([gp, mm], INFO)
    line = next(x for x in lines if "vs the mmap loader" in x)
    # mmap: 18 s + 4 more steps at 4 s = 34 s vs gpuio's measured 8 s
    assert "gpuio 8.0 s, mmap 34.0 s = 4.25 x (goal >= 3 x): MET" in line
    assert "mmap: 4 steps measured, the rest at the pace of steps 2-4" in line
    assert "4.50 x over steps 1-4" in line and "4.00 x per step over steps 2-4" in line
    scale = lines[0]
    assert "25.6 GB of features (>= 20 GB: yes)" in scale and "109.0 M edges (>= 100 M: yes)" in scale
    slow = _run("mmap", "file", [2.0 * (i + 1) for i in range(8)], cfg_steps=8)  # only 2 x slower
    assert "= 2.00 x (goal >= 3 x): NOT MET [both measured" in next(
        x for x in judged_lines([gp, slow], INFO) if "mmap loader" in x)


def test_judged_bound_belady_structure_and_hit_rate_lines():
    gp = _run("gpuio", "file", [1.0 * (i + 1) for i in range(8)], cfg_steps=8, host_hit_rate=0.4, gpu_hit_rate=0.1,
              device_rate=0.5, per_type={"paper": dict(host=0.4, gpu=0.1, storage=0.5)},
              bound=dict(steps=8, run_s=8.0, load_s=7.0, compute_s=2.0, compute_steps=10), vs_bound=8 / 7,
              belady=dict(gpuio_bytes=13e9, min_bytes=10e9, ratio=1.3, device_tier_ratio=1.4))
    gm = _run("gpuio", "memory", [0.7 * (i + 1) for i in range(5)], cfg_steps=8)  # capped at 5 steps
    lines = judged_lines([gp, gm], INFO)
    text = "\n".join(lines)
    assert "= 1.143 (goal <= 1.2): MET [over steps 1-8" in text
    assert "host buffer 0.400, GPU cache 0.100, storage 0.500" in text and "paper 0.40/0.10/0.50" in text
    assert "= 1.300 (goal <= 1.2): NOT MET" in text
    # structure over the common 5 steps: 3.5 s in memory vs 5 s on storage
    assert "structure on storage vs in memory (gpuio): 0.700 x the steps/s (goal >= 0.8): NOT MET" in text
    assert "structure cache 448 MiB in all, 448 MiB of device memory" in text and "steps 1-5" in text
    assert "for 935 MiB of structure files" in text
    big = "\n".join(judged_lines([gp, gm], dict(INFO, struct_cache_mb=2048)))
    assert "2048 MiB in all, 935 MiB of device memory" in big  # no file gets more cache than itself
    assert "vs the mmap loader" not in text  # no mmap run, no line


def _rank(run_s, feature_bytes, stall_s, feature_s=10.0, sample_s=1.0):
    return dict(run_s=run_s, feature_bytes=feature_bytes, structure_bytes=0, stall_s=stall_s, feature_s=feature_s,
                sample_s=sample_s, steps=10)


def test_disk_bound_line_judges_all_ranks_reads_against_the_disks_rate():
    # two ranks, 100 s (slowest), 17 + 17.5 GB read: 345 MB/s against a 352 MB/s disk = 0.98
    gp = _run("gpuio", "file", [100.0], cfg_steps=1, batch_size=1024,
              ranks=[_rank(100.0, 17.0e9, 90.0), _rank(99.0, 17.5e9, 91.0)])
    line = next(x for x in judged_lines([gp], dict(INFO, disk_mbs=352.0)) if "when the disk is the bound" in x)
    assert "2 GPU(s)" in line and "345.0 MB/s" in line and "= 0.98 x" in line and "(goal >= 0.9): MET" in line
    slow = _run("gpuio", "file", [100.0], cfg_steps=1, batch_size=1024, ranks=[_rank(100.0, 10.0e9, 90.0)] * 2)
    line = next(x for x in judged_lines([slow], dict(INFO, disk_mbs=352.0)) if "disk is the bound" in x)
    assert "= 0.57 x" in line and "NOT MET" in line
    # compute-bound: the point is not judged in this regime, only reported
    calm = _run("gpuio", "file", [100.0], cfg_steps=1, batch_size=1024, ranks=[_rank(100.0, 1e9, 10.0)] * 2)
    line = next(x for x in judged_lines([calm], dict(INFO, disk_mbs=352.0)) if "disk is the bound" in x)
    assert "not this regime (compute-bound" in line and "MET" not in line
    assert not any("disk is the bound" in x for x in judged_lines([gp], INFO))  # no disk rate given: no line


def test_judged_scale_line_flags_a_small_run_without_a_cgroup():
    line = judged_lines([], dict(INFO, feature_bytes=1e9, num_edges=5e6, limit=None))[0]
    assert "(>= 20 GB: NO)" in line and "(>= 100 M: NO)" in line and "NO memory cgroup" in line


def test_shared_host_buffer_is_filled_once_and_serves_the_same_rows(tmp_path):
    from gpuio.cache import TableCache
    from gpuio.tensor import TensorFile
    table = torch.randn(3000, 1024, generator=torch.Generator().manual_seed(3))  # 4 KiB rows: a page each
    tf = TensorFile.create(tmp_path / "f.npy", tuple(table.shape), "float32")
    tf.scatter(torch.arange(3000), table)
    tf.close()
    hot = torch.arange(3000, 0, -1).double()  # rows 0..299 hottest
    a_tf, b_tf = TensorFile.open(tmp_path / "f.npy"), TensorFile.open(tmp_path / "f.npy")
    a = TableCache(a_tf, gpu_cache_bytes=0, host_cache_rows=300, hot_scores=hot, device="cpu")
    filled = a_tf.stats()["bytes_read"]
    assert filled >= 300 * 4096
    b = TableCache(b_tf, gpu_cache_bytes=0, host_cache_rows=999, hot_scores=None, device="cpu", host_buffer=a.host)
    assert b.host is a.host and b_tf.stats()["bytes_read"] == 0  # nothing read to build b
    idx = torch.tensor([5, 299, 300, 2999, 5])
    assert torch.equal(b.gather(idx), table[idx]) and b.stats()["rows_host"] == 3
    assert b_tf.stats()["bytes_read"] == 2 * 4096  # only the two rows the buffer does not hold
    with pytest.raises(ValueError, match="indexes 3000 rows"):
        small = TensorFile.create(tmp_path / "g.npy", (10, 1024), "float32")
        TableCache(small, gpu_cache_bytes=0, device="cpu", host_buffer=a.host)
    a_tf.close(), b_tf.close()


class _SlowLoader:
    def __init__(self, n, dt):
        self.n, self.dt, self.times, self.closed = n, dt, dict(sample_s=0.0, feature_s=0.0, stall_s=0.0), False

    def __iter__(self):
        try:
            for i in range(self.n):
                time.sleep(self.dt)
                yield i
        finally:
            self.closed = True


def test_load_only_stops_after_its_deadline_and_closes_the_loader():
    pytest.importorskip("torch_geometric")
    from gpuio_apps.gnn.rgat import load_only
    ld = _SlowLoader(100, 0.01)
    r = load_only(ld, deadline=time.perf_counter() + 0.05)
    assert 3 <= r["steps"] < 100 and ld.closed and len(r["step_end_s"]) == r["steps"]
    assert r["step_end_s"] == sorted(r["step_end_s"]) and r["run_s"] >= r["step_end_s"][-1]
    assert load_only(_SlowLoader(4, 0.0))["steps"] == 4


def test_a_capped_pass_is_timed_to_the_end_of_its_last_step():
    """A capped pass's wall time also holds the wait for the loader's read in hand after the cap (up to one
    batch of page faults for mmap): comparisons must not charge it to the capped backend."""
    from gpuio_apps.gnn.hetero_job import _end_at_last_step
    r = dict(run_s=30.0, steps=3, step_end_s=[5.0, 10.0, 15.0], capped=True)
    _end_at_last_step(r)
    assert r["run_s"] == 15.0 and r["wall_s"] == 30.0 and at(r, 3) == 15.0
    full = dict(run_s=16.0, steps=3, step_end_s=[5.0, 10.0, 15.0], capped=False)  # the final sync counts
    _end_at_last_step(full)
    assert full["run_s"] == 16.0 and at(full, 3) == 16.0
