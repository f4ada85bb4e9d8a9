"""Load a benchmark or example script of this repository as a module, so its smoke test can call main()."""
from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_script(rel: str):
    """rel: a path under the repository root, e.g. "benchmarks/gnn_epoch.py"."""
    spec = importlib.util.spec_from_file_location(rel.replace("/", "_")[:-3], ROOT / rel)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
