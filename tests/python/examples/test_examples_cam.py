"""examples/cam_pipeline.py (CAM Fig. 7 through the stream-ordered Python API) runs end to end with tiny
sizes: on the host path everywhere, on the GPU where one is usable (else skipped, saying why). The example
checks every chunk's sum against a CPU reference of plain file reads and prints PASS only if all match."""
import re
import subprocess
import sys

import numpy as np
import pytest

import gpuio
from repo_scripts import ROOT

EXAMPLE = str(ROOT / "examples" / "cam_pipeline.py")
pytestmark = pytest.mark.gpu


def _run(tmp_path, device):
    path = tmp_path / "cam.bin"
    path.write_bytes(np.random.default_rng(11).integers(0, 256, 3 << 20, dtype=np.uint8).tobytes())
    r = subprocess.run([sys.executable, EXAMPLE, "--file", str(path), "--device", device, "--chunk-kib", "128",
                        "--rounds", "3", "--check", "1000"], capture_output=True, text=True, timeout=240,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS cam_pipeline.py" in r.stdout, r.stdout
    m = re.search(r"io_alone_s=([\d.]+) compute_alone_s=([\d.]+) pipeline_s=([\d.]+).*checked=(\d+)", r.stdout)
    assert m and int(m.group(4)) == 24, r.stdout  # 3 MiB / 128 KiB: every chunk checked
    return r.stdout


def test_cam_pipeline_example_host_path(tmp_path):
    out = _run(tmp_path, "cpu")
    assert "device cpu" in out


def test_cam_pipeline_example_gpu(tmp_path):
    pytest.importorskip("torch")
    probe = gpuio.gpu.probe()
    if not probe.get("count"):
        pytest.skip(f"no GPU path: {probe.get('error')}")
    out = _run(tmp_path, "cuda")
    assert "bounce->gpu" in out
