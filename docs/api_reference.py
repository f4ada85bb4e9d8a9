"""The public API reference: pdoc over the library's public modules, HTML into a folder. The applications (the
package gpuio_apps), the `python -m gpuio` launcher and private modules (gpuio._*) are left out. Fails when pdoc
warns (an annotation it cannot read, an __all__ name that does not resolve): fix the docstring or annotation it
names.

    python docs/api_reference.py [OUT_DIR]      # default build/api-docs; pdoc comes with the docs (or test) extra

For the documentation build: `build(out_dir)` from Python, or this file as a mkdocs hook (`hooks:
[docs/api_reference.py]` in mkdocs.yml): `on_files` adds the reference to the site under `api/`.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# pdoc's module spec: the library's package, less what is not its public API
MODULES = ["gpuio", "!gpuio\\._.*"]


class PdocWarned(RuntimeError):
    """pdoc printed a warning: the reference would be incomplete or wrong."""


def build(out_dir: str | Path, python: str = sys.executable) -> Path:
    """Write the HTML reference into out_dir with `python -m pdoc`; return its index.html. Raises PdocWarned
    (with pdoc's output) when pdoc warns, CalledProcessError's message when it fails."""
    out = Path(out_dir)
    r = subprocess.run([python, "-m", "pdoc", "--docformat", "markdown", "-o", str(out), *MODULES],
                       cwd=ROOT, capture_output=True, text=True)
    log = r.stdout + r.stderr
    if r.returncode != 0:
        raise RuntimeError(f"pdoc failed (exit {r.returncode}):\n{log}")
    if "warn" in log.lower():
        raise PdocWarned(f"pdoc warned: fix the docstring or annotation it names:\n{log}")
    return out / "index.html"


_pages: list = []  # the mkdocs hook's temporary folders, removed when the build ends


def on_files(files, config, **kwargs):
    """mkdocs hook: the reference joins the site's files under api/ (built into a temporary folder first), so
    the navigation and the pages' links to api/... are checked against the real pages."""
    import tempfile

    from mkdocs.structure.files import File
    tmp = Path(tempfile.mkdtemp(prefix="gpuio-api-"))
    _pages.append(tmp)
    build(tmp / "api")
    for page in sorted((tmp / "api").rglob("*")):
        if page.is_file():
            files.append(File(page.relative_to(tmp).as_posix(), str(tmp), config["site_dir"],
                              config["use_directory_urls"]))
    return files


def _remove_pages(**kwargs) -> None:
    """mkdocs hook (the build's end, or its failure): the temporary folders of on_files go."""
    import shutil

    while _pages:
        shutil.rmtree(_pages.pop(), ignore_errors=True)


on_post_build = on_build_error = _remove_pages


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0].startswith("-")):
        print("usage: python docs/api_reference.py [OUT_DIR]", file=sys.stderr)
        return 2
    try:
        index = build(args[0] if args else ROOT / "build" / "api-docs")
    except (PdocWarned, RuntimeError) as e:
        print(f"api-reference: {e}", file=sys.stderr)
        return 1
    print(f"api-reference: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
