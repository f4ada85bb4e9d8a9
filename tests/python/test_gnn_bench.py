"""The GNN epoch benchmark runs tiny on the CPU and reports its three judged ratios."""
import importlib.util
import json
import os

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "gnn_epoch.py")


def test_gnn_epoch_benchmark_tiny(tmp_path):
    spec = importlib.util.spec_from_file_location("gnn_epoch", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "r.json"
    ratios = mod.main(["--tiny", "--device", "cpu", "--workdir", str(tmp_path), "--json", str(out)])
    assert len(ratios) == 3 and all(v > 0 for v in ratios.values())
    saved = json.loads(out.read_text())
    assert set(saved["median"]) == {"gpuio", "mmap", "features_alone", "compute_alone", "gather_rows_s",
                                    "raw_blocks_s", "ref_iops"}
    assert saved["median"]["ref_iops"] > 0  # the raw device's rate comes from the in-process reference
