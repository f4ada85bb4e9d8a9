"""benchmarks/sim_scaling.py runs tiny in CI over emulated devices (the full size runs on a 16-core machine)."""
from __future__ import annotations

import pytest

from repo_scripts import load_script

pytest.importorskip("gpuio._core")




def test_sim_scaling_tiny(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GPUIO_SIM", raising=False)
    res = load_script("benchmarks/sim_scaling.py").main(["--tiny", "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert "scaling efficiency" in out and (tmp_path / "r.json").exists()
    assert res["many"][0]["devices"] == 2 and res["one"][0]["devices"] == 1
    # The devices came from the Engine's sim=dict option (no GPUIO_SIM), paced; the ceiling run free-running.
    assert "paced=on" in res["many"][0]["backend"] and "channels=1" in res["many"][0]["backend"]
    assert "paced=off" in res["ceiling"]["backend"] and "env=GPUIO_SIM" not in res["many"][0]["backend"]
    assert res["ratio"] > 0 and all(x["iops"] > 0 for x in res["one"] + res["many"])
