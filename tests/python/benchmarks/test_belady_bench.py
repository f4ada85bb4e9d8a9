"""benchmarks/belady_gnn.py runs tiny on the CPU; gpuio never reads less than Belady's MIN allows."""
import json

from repo_scripts import load_script


def test_belady_gnn_benchmark_tiny(tmp_path):
    mod = load_script("benchmarks/belady_gnn.py")
    out = tmp_path / "r.json"
    results = mod.main(["--tiny", "--device", "cpu", "--workdir", str(tmp_path), "--json", str(out),
                        "--windows", "0,4", "--policies", "clock", "--admissions", "replace,keep"])
    assert [(r["admission"], r["window"]) for r in results] == [("replace", 0), ("replace", 4), ("keep", 0),
                                                                  ("keep", 4)]
    for r in results:
        assert r["steps"] == 6 and r["min_bytes"] > 0 and r["ratio"] >= 1.0  # MIN is a lower bound
    assert len(json.loads(out.read_text())["results"]) == 4


def test_belady_hetero_benchmark_tiny(tmp_path):
    mod = load_script("benchmarks/belady_hetero.py")
    out = tmp_path / "r.json"
    results = mod.main(["--tiny", "--root", str(tmp_path / "d"), "--json", str(out), "--configs", "0/0,8/4"])
    assert [(r["window"], r["lookahead"]) for r in results] == [(0, 0), (8, 4)]
    for r in results:  # MIN is a lower bound, per type and in all
        assert r["device_tier_ratio"] >= 1.0 and min(r["per_type"].values()) >= 1.0
        assert r["ratio_with_fill"] >= 1.0 and r["window_min_ratio"] >= 1.0
    assert results[1]["device_tier_ratio"] <= results[0]["device_tier_ratio"]  # knowing the next batches helps
    assert len(json.loads(out.read_text())["results"]) == 2
