"""The README's Python code runs as written (a snippet with an undefined name once reached users). Every
```python block of README.md runs in a fresh empty directory, in its own interpreter; a block is skipped
only when the line right above its opening fence is `<!-- readme-test: skip (reason) -->`, and its test is
marked `slow` (pytest -m "not slow" leaves it out) when that line is `<!-- readme-test: slow (reason) -->`."""
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
    """Each block runs, and runs again in the same directory (a reader who pastes it twice must not hit a
    refusal to overwrite what the first run made)."""
    if reason is not None:
        pytest.skip(f"README.md:{line}: {reason}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    for run in ("first", "second"):
        r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, f"README.md:{line} failed on its {run} run:\n{r.stderr[-3000:]}"
