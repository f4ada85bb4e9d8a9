"""benchmarks/model_load.py at a tiny size on the CPU: every pass in its own process, every tensor checked,
both cache regimes (cold by evicting the file's pages), the save comparison, the peers' reading of gpuio's
file, and the table of ratios with its JSON."""
import json
import os
import subprocess
import sys

import pytest

from repo_scripts import ROOT

BENCH = str(ROOT / "benchmarks" / "model_load.py")


@pytest.mark.slow
def test_model_load_tiny(tmp_path):
    pytest.importorskip("safetensors")
    out = tmp_path / "ml.json"
    r = subprocess.run([sys.executable, BENCH, "--size-gib", "0.01", "--device", "cpu", "--rounds", "1",
                        "--save-rounds", "1", "--evict", "fadvise", "--raw-seconds", "0.02",
                        "--methods", "gpuio,safetensors", "--gpuio-variants", "threads=2,chunk_mib=1",
                        "--dir", str(tmp_path / "w"), "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(out.read_text())
    for m in ("gpuio", "gpuio[threads=2,chunk_mib=1]", "safetensors"):
        row = res["loads"][m]
        assert row["check"] == "ok" and len(row["cold_s"]) == 1 and len(row["warm_s"]) == 1, (m, row)
        assert row["regime"] == "cold (fadvise DONTNEED of the file)"
    cold = [p for p in res["passes"] if p["kind"] == "cold" and p["method"] == "gpuio"][0]
    warm = [p for p in res["passes"] if p["kind"] == "warm" and p["method"] == "gpuio"][0]
    # (a shared machine may evict a few pages between the warm-up and the pass: "all but a few")
    assert cold["resident_at_start"] < 0.5 and warm["resident_at_start"] > 0.99, (cold, warm, r.stdout)
    assert "direct" in res["gpuio_data_path"]["cold"]
    assert res["gpuio_data_path"]["warm"].startswith("pagecache ")
    # cold, the header's block is resident again (read to plan the load): tensors in it may come from there
    cst = cold["gpuio_stats"]
    assert cst["pagecache_bytes"] < 8192, cst
    assert res["bytes"] == cst["pagecache_bytes"] + cst["direct_bytes"] + cst["buffered_bytes"], cst
    assert warm["gpuio_stats"]["pagecache_bytes"] > 0.9 * res["bytes"]
    assert res["verify"]["safetensors"] == "ok" and set(res["verify"]) == {"safetensors", "fastsafetensors", "runai", "instanttensor"}
    assert res["verify"]["instanttensor"] == "skipped: instanttensor loads into CUDA memory only"
    assert isinstance(res["loads"]["safetensors"]["misaligned"], int)  # counted (at 256 B) per method
    assert set(res["saves"]) == {"gpuio", "safetensors"} and res["raw_best_Bps"] > 0
    # the reference: whole-file raw passes in the cold rotation, the grid's best configuration per request size
    # and 1 MiB at QD 128, each once per round; the grid's short samples only chose them
    assert len(res["raw_grid"]) == 2 and "raw[1 MiB uring 1thr QD128]" in res["raw"], res["raw"]
    raw_passes = [p for p in res["passes"] if p["method"].startswith("raw[")]
    assert len(raw_passes) == len(res["raw"]) >= 2 and all(  # each thread its whole requests
        p["bytes"] == res["file_bytes"] // p["request_bytes"] // p["threads"] * p["request_bytes"] * p["threads"]
        for p in raw_passes), raw_passes
    assert res["raw_best_Bps"] == max(v["Bps"] for v in res["raw"].values())
    assert len(res["paired_cold_raw"]) == 1 and res["paired_cold_raw"][0] > 0
    for k in ("cold: gpuio / best peer", "warm: gpuio / best peer", "cold: gpuio / raw disk best sequential read",
              "save: gpuio / safetensors.save_file + fsync"):
        assert res["ratios"][k]["best"] > 0, k
    assert "cold: gpuio / best peer" in r.stdout and "gpuio data path (warm): pagecache" in r.stdout
    assert not os.path.exists(tmp_path / "w" / "model.safetensors")  # removed without --keep


def test_model_load_ranks_tiny(tmp_path):
    """Two ranks, each loading its half of a sharded checkpoint (on the CPU here), every tensor checked."""
    pytest.importorskip("safetensors")
    bench = os.path.join(os.path.dirname(BENCH), "model_load_ranks.py")
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, bench, "--ranks", "2", "--shards", "3", "--size-gib", "0.01", "--device", "cpu",
                        "--evict", "fadvise", "--rounds", "1", "--dir", str(tmp_path / "w"), "--json", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["methods"] == ["gpuio", "gpuio-dist", "safetensors"], res["methods"]  # instanttensor: CUDA only
    assert len(res["passes"]) == 6 and all(p["check"] == "ok" for p in res["passes"]), res["passes"]
    gpuio_cold = [p for p in res["passes"] if p["method"] == "gpuio" and p["kind"] == "cold"][0]
    assert len(gpuio_cold["data_path"]) == 2 and all("direct" in d for d in gpuio_cold["data_path"])
    assert "cold: gpuio" in r.stdout and "warm: gpuio" in r.stdout and "gpuio-dist / gpuio" in r.stdout
    assert not [n for n in os.listdir(tmp_path / "w") if n.endswith(".safetensors")]


def test_model_load_ranks_all_pattern_tiny(tmp_path):
    """Three ranks each taking all of a sharded checkpoint through one gloo group (gpuio-dist: each byte read by
    one rank) beside each reading all of it alone; every tensor checked, the group's reads adding up to the file."""
    pytest.importorskip("safetensors")
    bench = os.path.join(os.path.dirname(BENCH), "model_load_ranks.py")
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, bench, "--ranks", "3", "--pattern", "all", "--methods", "gpuio,gpuio-dist",
                        "--size-gib", "0.005", "--device", "cpu", "--evict", "fadvise", "--rounds", "1",
                        "--dir", str(tmp_path / "w"), "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(out.read_text())
    assert len(res["passes"]) == 4 and all(p["check"] == "ok" for p in res["passes"]), res["passes"]
    dist_pass = [p for p in res["passes"] if p["method"] == "gpuio-dist"][0]
    assert sum(dist_pass["bytes_read"]) == res["bytes"] and min(dist_pass["bytes_read"]) > 0, dist_pass
    assert "each loading all the tensors" in r.stdout and "gpuio-dist / gpuio" in r.stdout
