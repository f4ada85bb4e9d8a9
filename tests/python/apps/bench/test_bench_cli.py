"""`gpuio bench --quick` runs end to end (tiny sizes, one round) and its JSON holds every workload with
positive figures and ratios for both engine backends; --plot writes a PNG."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from gpuio_apps.bench import RAW_GRID, WORKLOADS
from gpuio.engine import DEFAULTS
from repo_scripts import ROOT

pytestmark = pytest.mark.slow  # every test reads the module's one `gpuio bench --quick` run (~11 s)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    from gpuio_apps.cli import _register, app

    _register()
    where = tmp_path_factory.mktemp("bench")
    cwd = os.getcwd()
    os.chdir(where)  # the data file goes into the current directory by default
    try:
        r = CliRunner().invoke(app, ["bench", "--quick", "--size", "33M", "--json", "out.json",
                                     "--plot", "ratios.png"])
    finally:
        os.chdir(cwd)
    assert r.exit_code == 0, r.output + repr(r.exception)
    return where, r.output, json.loads((where / "out.json").read_text())


def test_json_has_every_workload_and_backend(quick_run):
    _, _, doc = quick_run
    rows = {(r["workload"], r["backend"]): r for r in doc["results"]}
    for w in WORKLOADS:
        for backend in ("uring", "posix"):
            r = rows[(w.name, backend)]
            assert r["gpuio"]["median"] > 0, (w.name, backend)
            assert r["raw_best"]["median"] > 0, (w.name, backend)
            assert r["ratio"]["median"] > 0 and r["ratio"]["min"] <= r["ratio"]["max"]
            assert r["cpu_us_per_op"]["gpuio"] > 0 and r["cpu_us_per_op"]["raw"] > 0
            assert r["raw_best_config"].startswith("raw ")
            assert r["gpuio_config"] in (f"gpuio {backend} QD32", f"gpuio {backend} QD128")
            assert r["workers"] == 2
            # Engine policy (direct_min_bytes, 16 KiB): small O_DIRECT requests go through registered staging.
            path = "staging" if w.request_bytes < DEFAULTS["direct_min_bytes"] else "direct"
            assert r["data_path"] == f"{backend}+{path}", (w.name, backend)


def test_data_file_is_real_data(quick_run):
    where, _, doc = quick_run
    st = os.stat(where / "gpuio-bench.dat")
    assert st.st_size == 33 << 20
    assert st.st_blocks * 512 >= st.st_size  # no holes: reads hit the device
    assert doc["meta"]["size_bytes"] == 33 << 20
    assert doc["meta"]["cache_regime"].startswith(("O_DIRECT", "cold"))


def test_table_and_plot(quick_run):
    where, output, doc = quick_run
    assert "ratio" in output and "rand 4KiB read" in output
    wide = [line for line in output.splitlines() if len(line) > 120]
    assert not wide, "wider than 120 columns:\n" + "\n".join(wide)
    # the code measured: this checkout's commit (the tests run from an editable install), never "None"
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert doc["meta"]["commit"].removesuffix("+dirty") == head
    assert f"commit {doc['meta']['commit']}" in output and "None" not in output
    assert (where / "ratios.png").read_bytes()[:4] == b"\x89PNG"


def test_samples_are_interleaved(quick_run):
    _, _, doc = quick_run
    for name, by_cfg in doc["samples"].items():
        # engine uring + posix at two ring depths + the whole raw grid, each measured once in a quick run
        assert len(by_cfg) == 2 * 2 + len(RAW_GRID), name
        assert all(len(v) == 1 and v[0]["bytes"] > 0 for v in by_cfg.values())


def test_a_second_run_reuses_the_data_file_and_replaces_its_own_json(tmp_path):
    """The write passes (engine and raw reference) leave the data file's marker alone, so a second run in the same
    directory reuses the file; the default --json of the first run is gpuio's own, so it is replaced, while a JSON
    gpuio did not write is still refused."""
    from gpuio_apps.cli import _register, app

    _register()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        runs = [CliRunner().invoke(app, ["bench", "--quick", "--size", "33M", "--workload", "write"]) for _ in "12"]
        (tmp_path / "theirs.json").write_text('{"results": []}')
        refused = subprocess.run([sys.executable, "-c", "from gpuio_apps.cli import main; main()", "bench", "--quick",
                                  "--size", "33M", "--json", "theirs.json"], capture_output=True, text=True, timeout=120)
    finally:
        os.chdir(cwd)
    for r in runs:
        assert r.exit_code == 0, r.output + repr(r.exception)
    doc = json.loads((tmp_path / "gpuio-bench.json").read_text())
    assert doc["written_by"] == "gpuio bench" and doc["meta"]["data_written_now"] is False
    assert {r["op"] for r in doc["results"]} == {"write"}
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "--json 'theirs.json': exists" in refused.stderr and "not written by gpuio" in refused.stderr
    assert (tmp_path / "theirs.json").read_text() == '{"results": []}'


def test_only_gpuio_bench_results_count_as_ours(tmp_path):
    from gpuio_apps.bench import report

    mine, other, broken = tmp_path / "mine.json", tmp_path / "other.json", tmp_path / "broken.json"
    report.write_json(str(mine), report.document({}, [], {}))
    other.write_text(json.dumps({"meta": {}, "results": [], "samples": {}}))
    broken.write_text('{"written_by": "gpuio bench"')
    assert report.is_ours(str(mine))
    assert not report.is_ours(str(other)) and not report.is_ours(str(broken))
    assert not report.is_ours(str(tmp_path / "missing.json"))


def test_an_installed_package_is_named_by_its_version():
    from gpuio_apps.cli.bench_views import build_label

    assert build_label({"commit": None, "version": "0.1.0"}) == "gpuio 0.1.0"
    assert build_label({"commit": "abc123", "version": "0.1.0"}) == "commit abc123"
