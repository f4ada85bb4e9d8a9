"""benchmarks/hf_load.py on a tiny generated model on the CPU: both methods in their own processes, cold (the
files' pages evicted) and warm, the logits bit-identical between them, the table and its JSON."""
import json
import subprocess
import sys

import pytest

from repo_scripts import ROOT

BENCH = str(ROOT / "benchmarks" / "hf_load.py")


@pytest.mark.slow
def test_hf_load_tiny(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    out = tmp_path / "hf.json"
    r = subprocess.run([sys.executable, BENCH, "--params-b", "0.005", "--device", "cpu", "--rounds", "1",
                        "--evict", "fadvise", "--dir", str(tmp_path / "m"), "--json", str(out), "--read-alone"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["shape"]["num_hidden_layers"] >= 2 and len(list((tmp_path / "m").glob("*.safetensors"))) >= 2
    digests = set()
    for regime in ("cold", "warm"):
        for m in ("gpuio", "transformers"):
            (p,) = res["passes"][regime][m]
            assert p["seconds"] > 0 and p["off_device"] == 0 and p["dtype"] == "torch.bfloat16", p
            digests.add(p["logits"])
        assert any(line.startswith(f"{regime}: gpuio") and "bit-identical" in line for line in res["table"])
    assert len(digests) == 1
    for regime in ("cold", "warm"):  # --read-alone: load_file by itself, every tensor, its rate beside the load
        (p,) = res["passes"][regime]["gpuio-read"]
        index = json.loads((tmp_path / "m" / "model.safetensors.index.json").read_text())
        assert p["seconds"] > 0 and p["tensors"] == len(index["weight_map"]), p
        assert p["misaligned"] == 0 and p["calls_max"] >= 1, p
        assert any(line.startswith(f"{regime}: the read alone") and "GB/s" in line for line in res["table"])
    assert res["passes"]["cold"]["gpuio"][0]["resident"] < 0.5 and res["passes"]["warm"]["gpuio"][0]["resident"] > 0.99
