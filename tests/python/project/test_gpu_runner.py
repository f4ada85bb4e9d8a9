"""scripts/gpu.sh, the GPU machine's one runner, checked where there is no GPU: every shell file parses, every suite
resolves in a dry run (the commands it would run, with every file of this repository they name present), names that
are no suite are refused in one line, the shared step helper bounds and records each step, and a suite runs end to
end on the CPU with the table and $OUT it leaves. scripts/ holds at most three scripts."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from repo_scripts import ROOT

GPU_SH = ROOT / "scripts" / "gpu.sh"
SHELL_FILES = [GPU_SH, ROOT / "scripts" / "setup.sh", ROOT / ".ci" / "run", *sorted((ROOT / "benchmarks" / "gpu").glob("*.sh"))]
# a repository path a suite names: benchmarks/x.py, tests/cuda/y.cu, examples/z.py ... (relative or under the root)
REPO_PATH = re.compile(r"(?:^|[\s=])(?:" + re.escape(str(ROOT)) + r"/)?((?:benchmarks|examples|tests|scripts|cpp|python|docs)"
                       r"/[\w./-]+\.(?:py|cu|sh|cpp))\b")


def gpu_sh(*args, env=None, timeout=60):
    return subprocess.run(["bash", str(GPU_SH), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


SUITES = [ln.split()[0] for ln in gpu_sh("--list").stdout.splitlines() if ln and not ln.startswith(" ")]


def test_scripts_folder_holds_at_most_three_scripts():
    scripts = sorted(p.name for p in (ROOT / "scripts").iterdir())
    assert len(scripts) <= 3, scripts
    assert {"gpu.sh", "setup.sh"} <= set(scripts)


@pytest.mark.parametrize("path", SHELL_FILES, ids=[p.name for p in SHELL_FILES])
def test_shell_file_parses(path):
    r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def test_the_suites_the_gpu_work_needs_are_there():
    assert {"build", "check", "demo", "host", "hetero", "apps", "graph", "ceiling", "scaling", "controller", "ceph",
            "kvikio", "gather", "streams", "gnn", "latency"} <= set(SUITES)


@pytest.mark.parametrize("suite", SUITES)
def test_every_suite_resolves_in_a_dry_run(suite, tmp_path):
    env = {"GPUIO_COMPARE_OLD": str(tmp_path / "old.tgz"), "OUT": str(tmp_path / "out")}
    r = gpu_sh("--dry-run", suite, env=env)
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    commands = [ln[2:] for ln in r.stdout.splitlines() if ln.startswith("+ ")]
    assert commands, r.stdout
    assert f"# suite {suite}" in r.stdout
    named = {m for c in commands for m in REPO_PATH.findall(c)}
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"{suite} names files that are not in the repository: {missing}"
    assert not (tmp_path / "out").exists()  # a dry run writes nothing


def test_a_dry_run_of_the_lead_call_builds_once_and_runs_the_gpu_tests_and_the_demo():
    r = gpu_sh("--dry-run", "check", "demo")
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.count("cmake --build") == 1
    assert "-m gpu --continue-on-collection-errors tests/python" in r.stdout and "-m gpuio demo" in r.stdout


@pytest.mark.parametrize("args,message", [(["nosuch"], "unknown suite 'nosuch'"), (["--fast", "check"], "'--fast'"),
                                          ([], "usage: bash scripts/gpu.sh")])
def test_bad_arguments_are_refused_in_one_line(args, message):
    r = gpu_sh(*args)
    assert r.returncode == 2 and r.stdout == "" and message in r.stderr.splitlines()[0]


def _lib(snippet: str, tmp_path, env=None):
    script = (f'repo={ROOT}; OUT={tmp_path}; GPU_DRY=0; mkdir -p "$OUT"; '
              f'source {ROOT}/benchmarks/gpu/lib.sh; suite=unit; {snippet}')
    # the runner's own settings of a surrounding gpu.sh call (this file runs inside one on the GPU machine) stay out
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GPUIO_", "GPU_", "BOUNDED_"))}
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                          env=dict(clean, **(env or {})))


def test_bounded_runs_a_step_into_its_log_and_its_row(tmp_path):
    r = _lib('bounded hello 60 bash -c "echo hi from the step; exit 3"; echo "rc=$?"', tmp_path)
    assert "rc=3" in r.stdout and "hi from the step" in r.stdout
    assert (tmp_path / "unit" / "hello.txt").read_text() == "hi from the step\n"
    name, rc, secs, limit = (tmp_path / "unit" / "steps.tsv").read_text().split("\t")
    assert (name, rc, limit.strip()) == ("hello", "3", "60") and secs.isdigit()


def test_bounded_skips_a_step_the_call_has_no_time_left_for(tmp_path):
    r = _lib('bounded late 60 touch "$OUT/ran"; echo "rc=$?"', tmp_path, env={"GPUIO_CALL_S": "10"})
    assert "rc=99" in r.stdout and "SKIPPED" in r.stdout and not (tmp_path / "ran").exists()
    assert (tmp_path / "unit" / "steps.tsv").read_text().split("\t")[:2] == ["late", "skipped"]


def test_a_suite_runs_end_to_end_on_the_cpu(tmp_path):
    """GPUIO_BUILD=none: the prologue and the `build` suite with this interpreter's gpuio, then the table."""
    out = tmp_path / "out"
    r = gpu_sh("build", env={"GPUIO_BUILD": "none", "GPUIO_PYTHON": sys.executable, "OUT": str(out)}, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    summary = (out / "summary.txt").read_text()
    assert "=== summary ===" in summary and "suites: build:ok" in summary and "gpuio built: " in summary
    assert (out / "info.txt").is_file() and (out / "gpu.txt").is_file()


def _memory_cgroup() -> bool:
    v2 = "/sys/fs/cgroup/cgroup.controllers"
    return os.path.isdir("/sys/fs/cgroup/memory") or (os.path.exists(v2) and "memory" in open(v2).read().split())


def test_in_cgroup_limits_the_command_with_the_machines_cgroup_version(tmp_path):
    if os.geteuid() != 0 or not _memory_cgroup():
        pytest.skip("memory cgroups need root and a memory controller (v1 or v2)")
    r = _lib('in_cgroup 512M bash -c "cat /proc/self/cgroup"; echo "rc=$?"', tmp_path)
    assert "rc=0" in r.stdout, r.stdout + r.stderr
    assert re.search(r"/gpuio-unit-\d+-\d+$", r.stdout, re.M) and "[cgroup] memory limit 512M, peak " in r.stdout


def test_the_apps_preflight_reports_what_the_applications_will_find(tmp_path):
    r = subprocess.run([sys.executable, "benchmarks/gpu_preflight.py", "--work", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("gpuio ") and "cuda_built" in r.stdout and f"free on {tmp_path}:" in r.stdout
    bad = subprocess.run([sys.executable, "benchmarks/gpu_preflight.py", "--work", str(tmp_path / "nope")], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--work" in bad.stderr and "not a folder" in bad.stderr


def test_live_files_name_only_scripts_and_pages_that_exist():
    """README, docs, the suites and the code name scripts/, benchmarks/ and archive paths that are there (the
    archive's own notes keep the names of their time)."""
    files = [ROOT / "README.md", ROOT / ".ci" / "run", *ROOT.glob("docs/*.md"), *ROOT.glob("benchmarks/**/*.sh"),
             *ROOT.glob("benchmarks/*.py"), *ROOT.glob("python/**/*.py"), *ROOT.glob("tests/**/*.py"),
             *ROOT.glob("scripts/*")]
    named = re.compile(r"(?<![\w/.-])((?:scripts|benchmarks|docs/archive)/[\w./-]*\w)")
    missing = sorted({f"{f.relative_to(ROOT)}: {p}" for f in files if f.name != "test_gpu_runner.py"
                      for p in named.findall(f.read_text()) if not list(ROOT.glob(p + "*"))})
    assert not missing, missing


@pytest.mark.parametrize("name,value,message", [("GPUIO_CALL_S", "9m", "not a whole number of seconds"),
                                                ("GPUIO_BUILD", "gpu", "not one of cuda, cpu, none")])
def test_bad_settings_are_refused_before_any_work(name, value, message):
    r = gpu_sh("check", env={name: value})
    assert r.returncode == 2 and r.stdout == "" and f"{name}='{value}': {message}" in r.stderr


def test_settings_of_the_old_scripts_are_refused_naming_the_new_form():
    r = gpu_sh("--dry-run", "check", env={"GPUIO_STEPS": "gpu demo"})
    assert r.returncode == 2 and r.stdout == ""
    assert "GPUIO_STEPS='gpu demo'" in r.stderr and "bash scripts/gpu.sh check demo" in r.stderr
