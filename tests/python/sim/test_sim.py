"""gpuio.sim and `gpuio sim`: replay of the shared traces, determinism, error messages, the ZnG report."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

sim = pytest.importorskip("gpuio.sim")
from typer.testing import CliRunner  # noqa: E402

from gpuio_apps.cli.sim import app  # noqa: E402

SHARED = Path(os.environ.get("GPUIO_SHARED", "/work/shared")) / "traces"


def _trace(tmp_path: Path) -> Path:
    """A real shared trace when present, else a small DiskSim file written here."""
    p = SHARED / "tpcc-small.trace"
    if p.exists():
        return p
    q = tmp_path / "small.trace"
    q.write_text("".join(f"{1000 * i} {i % 4} {(i * 7919) % 100000 * 8} 16 {i % 3 != 0:d}\n" for i in range(3000)))
    return q


def test_replay_reports_latency_percentiles_and_is_deterministic(tmp_path):
    t = _trace(tmp_path)
    a = sim.replay(t, preset="znand")
    b = sim.replay(t, preset="znand")
    assert a.stats == b.stats
    s = a.stats
    assert s["requests"] == s["reads"] + s["writes"] > 0
    assert 0 < s["latency"]["p50_ns"] <= s["latency"]["p99_ns"] <= s["latency"]["p999_ns"] <= s["latency"]["max_ns"]
    assert s["iops"] > 0
    slow = sim.replay(t, preset="tlc").stats
    assert slow["read_latency"]["p50_ns"] > s["read_latency"]["p50_ns"]  # 60 us vs 3 us reads


def test_synthetic_random_writes_on_a_full_drive_run_gc():
    t = sim.synthesize("znand", requests=20000, read_ratio=0.0, seed=3)
    r = sim.replay(t, preset="znand", prefill=1.0, blocks_per_plane=72, write_buffer_pages=0, queue_depth=32)
    assert r.stats["gc_runs"] > 0
    assert r.stats["waf"] > 1.0


def test_bad_input_names_the_value(tmp_path):
    with pytest.raises(ValueError, match="qlc"):
        sim.replay(_trace(tmp_path), preset="qlc")
    bad = tmp_path / "bad.trace"
    bad.write_text("10 0 8 16 1\n20 0 8 sixteen 1\n")
    with pytest.raises(ValueError, match=r":2:.*sixteen"):
        sim.load_trace(bad)
    with pytest.raises(FileNotFoundError):
        sim.load_trace(tmp_path / "missing.trace")


def test_cli_replay_json_and_errors(tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["replay", str(_trace(tmp_path)), "--preset", "tlc", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["stats"]["requests"] > 0 and out["config"]["preset"] == "tlc"
    r = runner.invoke(app, ["replay", str(_trace(tmp_path)), "--preset", "nope"])
    assert r.exit_code == 2 and "--preset 'nope'" in r.output


def test_zng_report_writes_table_json_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    runner = CliRunner()
    r = runner.invoke(app, ["zng", "--report", "--out", str(tmp_path), "--scale", "0.05", "--workloads", "vecadd,gemm"])
    assert r.exit_code == 0, r.output
    for f in ("zng_report.md", "zng_report.json", "zng_bandwidth.png", "zng_write_redundancy.png"):
        assert (tmp_path / f).stat().st_size > 0, f
    rep = json.loads((tmp_path / "zng_report.json").read_text())
    assert set(rep["results"]) == {"vecadd", "gemm"}
    assert set(rep["results"]["gemm"]) == set(sim.zng_platforms())
    for w in rep["write_redundancy"].values():
        assert w["grouped"] < w["none"]  # flash registers cut write redundancy
    assert "| vecadd |" in (tmp_path / "zng_report.md").read_text()


def test_zng_trace_file_round_trip(tmp_path):
    t = sim.zng_generate("vecadd", scale=0.01)
    p = tmp_path / "v.trace"
    t.save(str(p))
    back = sim.zng_load_trace(p)
    assert len(back) == len(t)
    assert sim.zng_run(back, "zng") == sim.zng_run(t, "zng")


def test_engine_over_simulated_devices_from_python():
    import gpuio

    opts = dict(preset="tlc", paced=False, device_bytes=16 << 20, seed=3)
    with gpuio.Engine(["sim0", "sim1", "sim2"], backend="sim", sim=opts, workers=2) as eng:
        assert eng.total_blocks == 3 * (16 << 20) // 4096
        rng = np.random.default_rng(5)
        blocks = rng.choice(eng.total_blocks, 300, replace=False).astype(np.int64)
        src = rng.integers(0, 256, 300 * 4096, dtype=np.uint8)
        eng.write(blocks, src)
        out = np.zeros_like(src)
        eng.read(blocks, out)
        assert np.array_equal(out, src)
        assert eng.stats()["backend"].startswith("sim")
    with pytest.raises(ValueError, match="colour"):
        gpuio.Engine(["sim0"], backend="sim", sim=dict(colour="red"))
