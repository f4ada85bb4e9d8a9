"""The README's Python code runs as written (a snippet with an undefined name once reached users). Every
```python block of README.md is saved as a script (its lines at their README line numbers, so an error names
the README's line) and run as a reader runs a saved example, `python block.py`, in a fresh empty directory,
twice; a block that starts processes runs the second time under the `spawn` start method (run_script), where
each child imports the script again, so a block without a main guard that it needs fails here as it would for
the reader. A block is skipped only when the line right above its opening fence is
`<!-- readme-test: skip (reason) -->`, and its test is marked `slow` (pytest -m "not slow" leaves it out) when
that line is `<!-- readme-test: slow (reason) -->`."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from repo_scripts import ROOT

README = ROOT / "README.md"
# `readme-test` here, `docs-test` in docs/ (tests/python/project/test_docs.py runs those pages' blocks with this parser)
SKIP = re.compile(r"<!--\s*(?:readme|docs)-test:\s*skip\b(.*?)-->")
SLOW = re.compile(r"<!--\s*(?:readme|docs)-test:\s*slow\b(.*?)-->")


def python_blocks(text: str, name: str = "README.md") -> list[tuple[int, str, str | None]]:
    """(line number, code, skip reason or None) of each ```python block of `text` (the file `name`)."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start = i + 1
            end = next((j for j in range(start, len(lines)) if lines[j].strip() == "```"), None)
            assert end is not None, f"{name}:{i + 1}: ```python block never closed"
            m = SKIP.search(lines[i - 1]) if i else None
            blocks.append((i + 1, "\n".join(lines[start:end]) + "\n",
                           (m.group(1).strip(" ()") or "marked") if m else None))
            i = end
        i += 1
    return blocks


def slow_blocks(text: str) -> set[int]:
    """The opening fences' line numbers of the ```python blocks marked slow (the line right above them)."""
    lines = text.splitlines()
    return {i + 1 for i, line in enumerate(lines) if line.strip() == "```python" and i and SLOW.search(lines[i - 1])}


# Code that starts processes (DataLoader workers, gpuio's sampling workers, multiprocessing): run under spawn too.
STARTS_PROCESSES = re.compile(r"num_workers|sample_workers|multiprocessing|\bProcess\(|\bPool\(|\bspawn\b")
# `python FILE` with the default start method set to spawn first: what the child processes of a script see on macOS
# and Windows, and under `multiprocessing_context="spawn"` (torch's DataLoader takes the default when given none).
# runpy runs FILE as __main__ with its __file__, so each spawned child imports FILE again, as under `python FILE`.
_SPAWN = ("import multiprocessing, runpy, sys; multiprocessing.set_start_method('spawn'); sys.argv = sys.argv[1:]; "
          "runpy.run_path(sys.argv[0], run_name='__main__')")
RUN_TIMEOUT_S = 300


def run_script(path, spawn: bool = False) -> subprocess.CompletedProcess:
    """`python path` in path's folder (the import path of this test run), or with spawn=True the same under the
    spawn start method; bounded by RUN_TIMEOUT_S."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    argv = [sys.executable, "-c", _SPAWN, path.name] if spawn else [sys.executable, path.name]
    return subprocess.run(argv, cwd=path.parent, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


BLOCKS = python_blocks(README.read_text())
SLOW_BLOCKS = slow_blocks(README.read_text())


def test_readme_has_python_code():
    assert BLOCKS, "README.md has no ```python block"
    assert sum(reason is None for _, _, reason in BLOCKS) >= 1  # at least one really runs


def test_block_parser_reads_fences_and_skip_and_slow_marks():
    text = ("x\n```python\na = 1\n```\n<!-- readme-test: skip (needs a GPU) -->\n```python\nb = 2\n```\n"
            "<!-- readme-test: slow (workers) -->\n```python\nc = 3\n```\n")
    assert python_blocks(text) == [(2, "a = 1\n", None), (6, "b = 2\n", "needs a GPU"), (10, "c = 3\n", None)]
    assert slow_blocks(text) == {10}


@pytest.mark.parametrize("line,code,reason", [
    pytest.param(*b, marks=[pytest.mark.slow] if b[0] in SLOW_BLOCKS else [], id=f"README.md:{b[0]}") for b in BLOCKS])
def test_readme_block_runs(tmp_path, line, code, reason):
    """Each block runs as a saved script, and runs again in the same directory (a reader who runs it twice must
    not hit a refusal to overwrite what the first run made): under spawn the second time when it starts
    processes."""
    if reason is not None:
        pytest.skip(f"README.md:{line}: {reason}")
    path = tmp_path / f"README_{line}.py"  # named in tracebacks; line N of the script is line N of README.md
    path.write_text("\n" * line + code)
    spawn = bool(STARTS_PROCESSES.search(code))
    for run, under_spawn in (("first", False), ("second" + (" (spawn)" if spawn else ""), spawn)):
        r = run_script(path, spawn=under_spawn)
        assert r.returncode == 0, f"README.md:{line} failed on its {run} run:\n{r.stderr[-3000:]}"


def test_the_spawn_run_finds_a_missing_main_guard(tmp_path):
    """A script that starts processes at import time runs under fork, and fails under spawn: each child imports it
    again (multiprocessing refuses to start processes while a child bootstraps). With the guard both run."""
    body = "p = multiprocessing.Process(target=print)\np.start()\np.join()\nassert p.exitcode == 0\n"
    bare, guarded = tmp_path / "bare.py", tmp_path / "guarded.py"
    bare.write_text("import multiprocessing\n" + body)
    guarded.write_text("import multiprocessing\nif __name__ == '__main__':\n" + "".join(
        "    " + line + "\n" for line in body.splitlines()))
    assert STARTS_PROCESSES.search(bare.read_text())
    assert run_script(bare).returncode == 0
    r = run_script(bare, spawn=True)
    assert r.returncode != 0 and "bootstrapping phase" in r.stderr, r.stderr
    assert run_script(guarded).returncode == 0 and run_script(guarded, spawn=True).returncode == 0
