"""benchmarks/gather_rate.py runs tiny on the CPU, checks its rows against NumPy, and prints its ratio rows."""
import json
import re
import subprocess
import sys

from repo_scripts import ROOT

BENCH = str(ROOT / "benchmarks" / "gather_rate.py")


def test_gather_rate_tiny(tmp_path):
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, BENCH, "--workdir", str(tmp_path), "--file-mib", "2", "--rows", "96",
                        "--batch", "40", "--repeats", "2", "--ref-seconds", "0.05", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for name in ("tf 4096 B", "fs 4096 B", "tf 512 B", "fs 512 B"):
        for unit in ("rows/s", "blocks/s"):
            line = next(x for x in r.stdout.splitlines() if x.startswith(f"{name} {unit}"))
            median, spread, ratio, ratio_spread, vs_ref = (float(v) for v in
                                                           re.findall(r"[0-9.]+", line[len(name) + 8:]))
            assert median > 0 and ratio > 0 and vs_ref > 0, line
    saved = json.loads(out.read_text())
    assert len(saved["runs"]["raw blocks/s"]) == 2 * 4  # a raw pass before each measured pass
    assert all(len(v) == 2 for v in saved["ratios"].values())
    assert len(saved["runs"]["ref IOPS (2x QD128)"]) == 2  # the in-process raw reference, once per repeat
    # one row per distinct block: each pass reads exactly as many blocks as rows (cache too small to hit)
    assert saved["median"]["tf 512 B blocks/s"] == saved["median"]["tf 512 B rows/s"]


def test_gather_rate_per_io_tiny(tmp_path):
    """--per-io prints the judged ratios (engine vs one raw thread, gather vs one raw thread, one row vs pread and
    memmap) with the per-stage breakdown naming the bound."""
    out = tmp_path / "p.json"
    r = subprocess.run([sys.executable, BENCH, "--per-io", "--workdir", str(tmp_path), "--file-mib", "2", "--rows",
                        "96", "--batch", "40", "--repeats", "1", "--ref-seconds", "0.05", "--sparse-gib", "1",
                        "--one-row-reads", "20", "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert re.search(r"engine \(direct_min_bytes=default.*ratio [0-9.]+ \(bar 0.8.*iobench buffers [0-9,]+: [0-9.]+",
                     r.stdout), r.stdout
    assert "bound: " in r.stdout and "python=" in r.stdout
    assert re.search(r"TensorFile.gather .*ratio [0-9.]+ \(bar 0.9", r.stdout), r.stdout
    assert re.search(r"cold .* ratio [0-9.]+ \(bar 1.5\); warm .* ratio [0-9.]+ \(bar 2\)", r.stdout), r.stdout
    assert re.search(r"batches of 64 through __getitems__ .*cold [0-9.]+ us a row, [0-9.]+ x faster", r.stdout), r.stdout
    saved = json.loads(out.read_text())
    for pass_ in saved["engine"] + saved["gather"]:  # the raw thread ran into the engine's memory and into iobench's
        assert pass_["raw"] > 0 and pass_["raw_hot"] > 0 and pass_["hot_ratio"] > 0
    assert saved["one_row"]["cold_batch_us"] > 0 and saved["one_row"]["warm_batch_us"] > 0
    assert saved["one_row"]["inline_ops"] == 6 * 20  # every tf[i] took the inline path (3 rounds, cold and warm)
    assert not (tmp_path / "per_io_sparse.img").exists()  # the sparse file it made is gone
