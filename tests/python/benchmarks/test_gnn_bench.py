"""The GNN epoch benchmark runs tiny on the CPU and reports its three judged ratios."""
import json

from repo_scripts import load_script


def test_gnn_epoch_benchmark_tiny(tmp_path):
    mod = load_script("benchmarks/gnn_epoch.py")
    out = tmp_path / "r.json"
    ratios = mod.main(["--tiny", "--device", "cpu", "--workdir", str(tmp_path), "--json", str(out)])
    assert len(ratios) == 3 and all(v > 0 for v in ratios.values())
    saved = json.loads(out.read_text())
    assert set(saved["median"]) == {"gpuio", "mmap", "features_alone", "compute_alone", "gather_rows_s",
                                    "raw_blocks_s", "ref_iops"}
    assert saved["median"]["ref_iops"] > 0  # the raw device's rate comes from the in-process reference
