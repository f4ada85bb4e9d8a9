"""Every command on benchmarks/RESULTS.md runs as written: each names a runner that exists (bash scripts/gpu.sh and
suites it knows, a benchmarks/*.py script, `gpuio bench`) with options that runner's own --help lists, and no
setting gpu.sh refuses (the replaced scripts' GPUIO_STEPS, GPUIO_APPS_BUDGET_S, ...). The options inside the
suites' GPUIO_<SUITE>_ARGS are checked against the script the suite hands them to."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import pytest

from repo_scripts import ROOT

PAGE = ROOT / "benchmarks" / "RESULTS.md"
# settings gpu.sh refuses (they belonged to the scripts it replaced)
REFUSED = ("GPUIO_STEPS", "GPUIO_APPS_BUDGET_S", "GPUIO_APPS_SKIP_BUILD", "GPUIO_APPS_NO_CGROUP")
# a suite's GPUIO_*_ARGS -> the script that gets them
ARGS_OF = {"GPUIO_GNN_ARGS": "benchmarks/gnn_epoch.py", "GPUIO_WEIGHTS_ARGS": "benchmarks/model_load.py",
           "GPUIO_WORKERS_ARGS": "benchmarks/loader_workers.py", "GPUIO_BENCH_EXTRA": "gpuio bench"}


def page_commands(text: str) -> list[str]:
    """The commands the page gives: each suite's `Run:` and each run key's (`- a: `...``)."""
    return re.findall(r"Run: `([^`]+)`", text) + re.findall(r"^- [a-z]+: `([^`]+)`", text, re.M)


def simple_commands(command: str) -> list[list[str]]:
    """The simple commands of a line (split at ; && and the bodies of for loops), as words, env first."""
    out = []
    for part in re.split(r";|&&", command):
        words = shlex.split(part.strip())
        if words[:1] == ["do"]:
            words = words[1:]
        if words[:1] in (["for"], ["done"], []):
            continue
        out.append(words)
    return out


@lru_cache(maxsize=None)
def help_text(runner: str) -> str:
    argv = ([sys.executable, "-m", "gpuio_apps", "bench", "--help"] if runner == "gpuio bench" else
            [sys.executable, str(ROOT / runner), "--help"])
    env = dict(os.environ, COLUMNS="300", TERM="dumb", NO_COLOR="1")
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert r.returncode == 0, f"{runner} --help failed: {r.stderr[-400:]}"
    return r.stdout


def options(words: list[str]) -> list[str]:
    return [w.split("=", 1)[0] for w in words if w.startswith("--")]


def gpu_suites() -> set[str]:
    r = subprocess.run(["bash", "scripts/gpu.sh", "--list"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    return {ln.split()[0] for ln in r.stdout.splitlines() if ln and not ln.startswith(" ")}


def problems(command: str, suites: set[str]) -> list[str]:
    """What keeps `command` from running as written ([] when nothing does)."""
    bad = []
    for words in simple_commands(command):
        env = {}
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            k, v = words.pop(0).split("=", 1)
            env[k] = v
        bad += [f"{k} is refused by gpu.sh" for k in env if k in REFUSED]
        checks = [(ARGS_OF[k], shlex.split(v)) for k, v in env.items() if k in ARGS_OF]
        if words[:2] == ["bash", "scripts/gpu.sh"]:
            bad += [f"gpu.sh has no suite {s!r}" for s in words[2:] if s not in suites]
        elif words[:2] == ["gpuio", "bench"]:
            checks.append(("gpuio bench", words[2:]))
        elif len(words) > 1 and words[0] in ("python", "python3") and words[1].startswith("benchmarks/"):
            if not (ROOT / words[1]).is_file():
                bad.append(f"no script {words[1]}")
                continue
            checks.append((words[1], words[2:]))
        else:
            bad.append(f"names no runner of this repository: {' '.join(words)!r}")
        for runner, args in checks:
            helped = help_text(runner)
            bad += [f"{runner} takes no {o}" for o in options(args) if not re.search(re.escape(o) + r"\b", helped)]
    return bad


def test_every_command_on_the_results_page_runs_as_written():
    commands = sorted(set(page_commands(PAGE.read_text())))
    assert len(commands) > 30
    suites = gpu_suites()
    assert {"check", "demo", "weights"} <= suites
    scripts = {w[1] for c in commands for w in simple_commands(c) if w[:1] in (["python"], ["python3"])}
    with ThreadPoolExecutor(4) as pool:  # the --help texts, side by side (each imports torch)
        list(pool.map(help_text, sorted(s for s in scripts if (ROOT / s).is_file()) + ["gpuio bench"]))
    bad = {c: p for c in commands if (p := problems(c, suites))}
    assert not bad, "\n".join(f"{c}: {'; '.join(p)}" for c, p in bad.items())


# the missing scripts' paths are spelt in two pieces: test_gpu_runner checks that files name only paths that exist
@pytest.mark.parametrize("command, named", [
    ("bash scripts/" + "gpu-check.sh", "names no runner"),
    ("GPUIO_STEPS=gpu bash scripts/gpu.sh check", "GPUIO_STEPS is refused"),
    ("bash scripts/gpu.sh nosuch", "no suite 'nosuch'"),
    ("python benchmarks/" + "no_such.py --x", "no script benchmarks/" + "no_such.py"),
    ("python3 benchmarks/sim_speed.py --no-such-option 3", "takes no --no-such-option"),
    ("GPUIO_WEIGHTS_ARGS='--rounds 2 --no-such-flag' bash scripts/gpu.sh weights", "takes no --no-such-flag"),
])
def test_the_command_check_names_what_does_not_run(command, named):
    got = problems(command, gpu_suites())
    assert any(named in p for p in got), got
