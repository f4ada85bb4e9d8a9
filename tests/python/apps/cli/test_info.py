"""gpuio.info() resolves (it once pointed at a missing module) and returns the report that `gpuio info` prints."""
from __future__ import annotations

import json
import os

import pytest

import gpuio
from gpuio import _core
from gpuio_apps.cli import main


def test_info_is_the_cli_report(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    r = gpuio.info()
    assert {"kernel", "io_uring", "cuda_layer_built", "gpu", "gds", "data_paths"} <= set(r)
    assert r["cuda_layer_built"] == bool(_core.cuda_built)
    assert set(r["io_uring"]) == {"direct", "buffered"}
    assert r["io_uring"]["buffered"].startswith("uring") or r["io_uring"]["buffered"].startswith("unavailable")
    if not _core.cuda_built:  # the CPU build: no GPU data path, said so
        assert r["data_paths"]["gpu"].startswith("none")
    assert list(tmp_path.iterdir()) == []  # the probe file is gone again
    with pytest.raises(SystemExit) as ei:
        main(["info", "--json"])
    assert ei.value.code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed.keys() == r.keys() and printed["data_paths"] == r["data_paths"]
    assert printed["kernel"] == r["kernel"] and printed["io_uring"] == r["io_uring"]


@pytest.mark.skipif(os.path.exists("/proc/driver/nvidia/version"), reason="an NVIDIA driver is loaded here")
def test_info_without_a_driver_says_there_is_none(tmp_path, monkeypatch, capsys):
    """CUDA reports a missing driver as cudaErrorInsufficientDriver ("driver version is insufficient"); gpuio
    info says there is no driver and no GPU instead of sending the reader to upgrade one."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as ei:
        main(["info"])
    assert ei.value.code == 0
    out = capsys.readouterr().out
    gpu_lines = [line for line in out.splitlines() if line.startswith(("GPU ", "data path gpu"))]
    assert len(gpu_lines) == 2, out
    for line in gpu_lines:
        assert "no NVIDIA driver is loaded" in line and "no GPU" in line and "insufficient" not in line, line
