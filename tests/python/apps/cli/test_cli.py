"""The installed `gpuio` command: every documented subcommand is registered and answers --help."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

COMMANDS = ["info", "demo", "bench", "import", "sim"]


def _gpuio() -> list[str]:
    # The script installed beside this interpreter (a venv's bin/), not whichever `gpuio` PATH finds first.
    exe = Path(sys.executable).with_name("gpuio")
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from gpuio_apps.cli import main; main()"]


def test_top_level_help_lists_every_command():
    r = subprocess.run(_gpuio() + ["--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for c in COMMANDS:
        assert c in r.stdout, f"command {c!r} missing from gpuio --help:\n{r.stdout}"


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_answers_help(command):
    r = subprocess.run(_gpuio() + [command, "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"gpuio {command} --help failed:\n{r.stdout}\n{r.stderr}"
    assert "Usage" in r.stdout


def test_unknown_command_is_named():
    r = subprocess.run(_gpuio() + ["frobnicate"], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "frobnicate" in (r.stdout + r.stderr)
