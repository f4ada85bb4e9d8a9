"""The user documentation (mkdocs.yml, docs/): the site builds in strict mode (any warning fails: a broken link, a
page missing from the navigation, a generated reference that failed), with the CLI reference and the API reference
generated from the code; and every page's Python examples run as written.

A page's ```python blocks run in order, as one script, in a fresh empty directory: a later block may use what an
earlier one made, and each block's lines keep their line numbers (an error names `guides_PAGE.md.0.py", line N`:
line N of docs/guides/PAGE.md). A block with its own `if __name__ == "__main__":` is a complete program and runs
as a script of its own (after the others, in the same directory). Each script is saved to a file and run as
`python FILE`; one that starts processes runs again under the spawn start method (test_readme.run_script), where
each child imports the script again. A block that cannot run in CI is marked by the line
`<!-- docs-test: skip (reason) -->` right above it (as the README marks its sketches), and is left out of the
script."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from repo_scripts import ROOT
from test_readme import STARTS_PROCESSES, python_blocks, run_script, slow_blocks

DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "archive" not in p.relative_to(DOCS).parts)
EXAMPLE_PAGES = [p for p in PAGES if python_blocks(p.read_text(), p.name)]


MAIN_GUARD = re.compile(r"^if __name__ == .__main__.:", re.M)


def page_scripts(page: Path) -> list[str]:
    """The page's runnable blocks as scripts whose every line sits at its line number in the page: one script of
    the blocks that continue each other, and one of its own for each block that is a complete program (it has an
    `if __name__ == "__main__":`: spawned workers import it again, and must find only its definitions)."""
    shared: list[str] = []
    scripts: list[list[str]] = []
    for fence, code, reason in python_blocks(page.read_text(), str(page.relative_to(ROOT))):
        if reason is not None:
            continue
        lines = shared if not MAIN_GUARD.search(code) else []
        lines += [""] * (fence - len(lines))  # the code starts on the line after the fence (1-based `fence`)
        lines += code.splitlines()
        if lines is not shared:
            scripts.append(lines)
    return ["\n".join(lines) + "\n" for lines in ([shared] if shared else []) + scripts]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built once in strict mode: (its folder, mkdocs' log)."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("pdoc")
    out = tmp_path_factory.mktemp("site")
    # Material prints a notice about its end of life with every build (not a warning of the build's)
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=600)
    log = r.stdout + r.stderr
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{log[-6000:]}"
    return out, log


def test_site_builds_without_warnings(site):
    out, log = site
    assert not re.search(r"^(WARNING|ERROR)\b", log, re.M), log
    for page in ("index.html", "getting-started/index.html", "guides/gnn-features/index.html",
                 "guides/loader-workers/index.html", "reference/cli/index.html", "decisions/index.html"):
        assert (out / page).is_file(), f"{page} is not in the site"


def test_cli_reference_has_every_command(site):
    from gpuio_apps import cli

    page = (site[0] / "reference" / "cli" / "index.html").read_text()
    for name in cli._COMMANDS:
        assert f'id="gpuio-{name}"' in page, f"gpuio {name} is missing from the CLI reference"
    assert 'id="gpuio-sim-replay"' in page and "Usage: gpuio sim replay" in page  # subcommands and their help
    assert 'id="gpuio-demo-hetero"' in page and "Usage: gpuio demo --hetero" in page  # the flag command


def test_api_reference_is_in_the_site(site):
    api = site[0] / "api"
    engine = (api / "gpuio" / "engine.html").read_text()
    assert "aligned_empty" in engine and "attach_gpu" in engine and "default_engine" in engine
    volumes = (api / "gpuio" / "volumes.html").read_text()
    assert "lock_owners" in volumes and "create_tensor" in volumes
    assert (api / "index.html").is_file() and (api / "gpuio" / "tensor.html").is_file()
    assert "load_file" in (api / "gpuio" / "safetensors.html").read_text()
    assert not (api / "gpuio" / "cli.html").exists()  # applications are not the library's API


def test_page_scripts_keep_line_numbers():
    page = DOCS / "guides" / "loader-workers.md"
    text = page.read_text().splitlines()
    scripts = [s.splitlines() for s in page_scripts(page)]
    blocks = [b for b in python_blocks(page.read_text(), page.name) if b[2] is None]
    assert len(scripts) == 3 and len(blocks) == 3  # the blocks that continue each other, and two whole programs
    for fence, code, _ in blocks:
        lines = code.splitlines()
        script = next(s for s in scripts if len(s) > fence and s[fence] == lines[0])  # 0-based: after the fence
        assert script[fence:fence + len(lines)] == text[fence:fence + len(lines)] == lines


def test_skipped_examples_say_why():
    for page in EXAMPLE_PAGES:
        for fence, _, reason in python_blocks(page.read_text(), page.name):
            assert reason != "marked", f"{page.relative_to(ROOT)}:{fence}: a skip mark without a reason"


@pytest.mark.parametrize("page", [  # a page with a block marked `<!-- docs-test: slow (reason) -->` is a slow test
    pytest.param(p, marks=[pytest.mark.slow] if slow_blocks(p.read_text()) else [], id=str(p.relative_to(DOCS)))
    for p in EXAMPLE_PAGES])
def test_page_examples_run(tmp_path, page):
    scripts = page_scripts(page)
    if not scripts:
        pytest.skip(f"{page.relative_to(ROOT)}: every example is marked as a sketch")
    for i, script in enumerate(scripts):
        path = tmp_path / f"{page.relative_to(DOCS).as_posix().replace('/', '_')}.{i}.py"  # named in tracebacks
        path.write_text(script)
        for spawn in (False, True) if STARTS_PROCESSES.search(script) else (False,):
            r = run_script(path, spawn=spawn)
            assert r.returncode == 0, (f"{page.relative_to(ROOT)}: an example failed{' under spawn' if spawn else ''}:"
                                       f"\n{r.stderr[-4000:]}")


CODE = [*(ROOT / "cpp").rglob("*.[ch]pp"), *(ROOT / "cpp").rglob("*.cu*"), *(ROOT / "python").rglob("*.py")]


def test_code_names_no_issue_numbers():
    """History (which issue, which session) lives in commit messages and docs/decisions/, not in code comments."""
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in CODE
             for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
             if re.search(r"\bissue [0-9]", line, re.I)]
    assert not found, "\n".join(found)


def test_decision_records_named_in_code_exist():
    records = {p.name[:4] for p in (DOCS / "decisions").glob("[0-9][0-9][0-9][0-9]-*.md")}
    named = {(str(p.relative_to(ROOT)), n) for p in CODE
             for m in re.finditer(r"docs/decisions/(\d{4}(?:, \d{4})*)", p.read_text(errors="replace"))
             for n in m.group(1).split(", ")}
    assert named, "no code names a decision record"
    missing = sorted(f"{path}: docs/decisions/{n}" for path, n in named if n not in records)
    assert not missing, missing
