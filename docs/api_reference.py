"""The public API reference: pdoc over the library's public modules, HTML into a folder. The applications (cli,
apps, gnn, bench) and private modules (gpuio._*) are left out. Fails when pdoc warns (an annotation it cannot
read, an __all__ name that does not resolve): fix the docstring or annotation it names.

    python docs/api_reference.py [OUT_DIR]      # default build/api-docs; pdoc comes with the docs (or test) extra

For the documentation build: `build(out_dir)` from Python, or this file as a mkdocs hook (`hooks:
[docs/api_reference.py]` in mkdocs.yml): `on_post_build` writes the reference under the site's `api/`.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# pdoc's module spec: the package, less what is not the library's public API
MODULES = ["gpuio", "!gpuio\\._.*", "!gpuio\\.cli", "!gpuio\\.apps", "!gpuio\\.gnn", "!gpuio\\.bench"]


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


def on_post_build(config, **kwargs) -> None:
    """mkdocs hook: the API reference under the built site's api/."""
    build(Path(config["site_dir"]) / "api")


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
