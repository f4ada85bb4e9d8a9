"""The raw-device reference is a tool of its own (cpp/tools/raw), not part of libgpuio: gpuio_apps._raw runs it
in-process for `gpuio bench` (same results as the C++ tests check), the gpuio-raw command prints one JSON line per
run and refuses a bad option with one line naming it, and gpuio._core no longer carries it."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import gpuio._core as core
from gpuio_apps.bench import raw_bench
from repo_scripts import ROOT

BLOCK = 4096


@pytest.fixture
def data(tmp_path):
    p = tmp_path / "raw.bin"
    p.write_bytes(os.urandom(256 * BLOCK))
    return p


def test_library_module_has_no_raw_reference():
    assert not hasattr(core, "raw_bench")


def test_in_process_reference_reads_exactly_what_it_counts(data):
    r = raw_bench(str(data), block_bytes=BLOCK, queue_depth=8, threads=2, ops_max=64, sequential=True)
    assert r["ops"] == 128 and r["bytes"] == 128 * BLOCK and r["seconds"] > 0


@pytest.mark.parametrize("uring", [True, False])
def test_write_passes_leave_the_first_skip_bytes_alone(data, uring):
    """`gpuio bench` keeps its data file's marker in the first 4 KiB; its raw write passes must not touch it."""
    before = data.read_bytes()
    r = raw_bench(str(data), block_bytes=2 * BLOCK, queue_depth=4, threads=2, ops_max=500, write=True,
                  uring=uring, skip_bytes=BLOCK)  # rounded up to one whole 8 KiB request
    after = data.read_bytes()
    assert r["ops"] == 1000
    assert after[:2 * BLOCK] == before[:2 * BLOCK]
    assert after[2 * BLOCK:] != before[2 * BLOCK:]  # the writes landed past it
    with pytest.raises(ValueError, match="past skip_bytes=1044480, fewer than threads"):
        raw_bench(str(data), threads=2, skip_bytes=255 * BLOCK)


def test_in_process_reference_errors_keep_errno_and_name_the_value(tmp_path, data):
    with pytest.raises(FileNotFoundError, match="cannot open"):
        raw_bench(str(tmp_path / "missing.bin"))
    with pytest.raises(ValueError, match="block_bytes=1000"):
        raw_bench(str(data), block_bytes=1000)


def _tool() -> Path:
    found = sorted(ROOT.glob("build/*/cpp/tools/raw/gpuio-raw"))
    if not found:
        pytest.skip("gpuio-raw is not built (bash scripts/setup.sh builds it under build/)")
    return found[0]


def test_command_prints_one_json_line_per_run(data):
    r = subprocess.run([str(_tool()), str(data), "--ops-max", "32", "--threads", "2", "--sequential", "--psync"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["ops"], out["bytes"], out["engine"], out["pattern"], out["threads"]) == (64, 64 * BLOCK, "psync", "seq", 2)


@pytest.mark.parametrize("args,named", [(["--threads", "x"], "--threads 'x'"), (["--seconds", "-1"], "--seconds '-1'"),
                                        (["--bogus"], "--bogus"), ([], "FILE: missing")])
def test_command_refuses_bad_options_in_one_line(data, args, named):
    argv = [str(_tool())] + ([str(data)] if args else []) + args
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines()[0].startswith("gpuio-raw: error: ") and named in r.stderr.splitlines()[0]


def test_command_failed_io_is_one_line_exit_1(tmp_path):
    r = subprocess.run([str(_tool()), str(tmp_path / "missing.bin")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cannot open" in r.stderr
