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
