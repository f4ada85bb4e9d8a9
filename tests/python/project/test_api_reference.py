"""The public API reference (docs/api_reference.py; its pages are built with the documentation site and checked by
tests/python/project/test_docs.py): mypy accepts the public modules (engine, gpu, tensor, rows, streams, cache;
configured in pyproject.toml), and every public class, function and method of the documented modules has a
docstring. pdoc and mypy come with the test extra."""
from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

from repo_scripts import ROOT

DOCUMENTED = ["gpuio.engine", "gpuio.gpu", "gpuio.tensor", "gpuio.device_array", "gpuio.rows", "gpuio.cache",
              "gpuio.graph", "gpuio.loader", "gpuio.streams", "gpuio.sim", "gpuio.volumes", "gpuio.outputs",
              "gpuio.pyg.feature_store", "gpuio.pyg.graph_store", "gpuio.pyg.sampler", "gpuio.pyg.hetero",
              "gpuio.pyg.hetero_loader", "gpuio.pyg.hetero_ops"]


def test_api_reference_script_refuses_bad_arguments():
    """The pages themselves are built, with the site, by project/test_docs.py (once: pdoc takes a while)."""
    r = subprocess.run([sys.executable, "docs/api_reference.py", "a", "b"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("usage: python docs/api_reference.py")


def test_mypy_accepts_the_public_modules(tmp_path):
    pytest.importorskip("mypy")
    r = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Success" in r.stdout, r.stdout + r.stderr


def _public(module):
    names = getattr(module, "__all__", None) or [n for n, v in vars(module).items() if not n.startswith("_")
                                                 and getattr(v, "__module__", None) == module.__name__]
    for name in names:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            yield f"{module.__name__}.{name}", value
            if inspect.isclass(value):
                for attr, member in vars(value).items():
                    f = member.fget if isinstance(member, property) else member
                    f = f.__func__ if isinstance(f, (staticmethod, classmethod)) else f
                    if not attr.startswith("_") and inspect.isfunction(f):
                        yield f"{module.__name__}.{name}.{attr}", f


def test_public_names_have_docstrings():
    pytest.importorskip("torch_geometric")
    missing = [q for m in DOCUMENTED for q, v in _public(importlib.import_module(m)) if not (v.__doc__ or "").strip()]
    assert not missing, "no docstring: " + ", ".join(missing)


def test_type_checkers_see_the_lazy_names(tmp_path):
    """gpuio loads its names on first use (a module __getattr__); its TYPE_CHECKING imports tell type checkers what
    they are, so `gpuio.TensorFile` is the class for mypy, not Any."""
    pytest.importorskip("mypy")
    prog = tmp_path / "uses.py"
    names = ["TensorFile", "TableCache", "Engine", "Future", "DeviceArray", "info", "FeatureStore"]
    prog.write_text("import gpuio\n" + "".join(f"reveal_type(gpuio.{n})\n" for n in names)
                    + "reveal_type(gpuio.streams.StreamStore)\n")
    r = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), str(prog)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    revealed = [line.split("Revealed type is ", 1)[1] for line in r.stdout.splitlines() if "Revealed type" in line]
    assert r.returncode == 0 and len(revealed) == len(names) + 1, r.stdout + r.stderr
    assert not [t for t in revealed if t.strip('"') == "Any"], revealed
    assert revealed[0].endswith('-> gpuio.tensor.TensorFile"')
    assert revealed[-1].endswith('-> gpuio.streams.store.StreamStore"')
    assert revealed[1] == revealed[-2], "gpuio.FeatureStore is gpuio.TableCache"


def _library_modules() -> list[str]:
    import pkgutil

    import gpuio

    return sorted(m.name for m in pkgutil.walk_packages(gpuio.__path__, "gpuio.")
                  if not any(p.startswith("_") for p in m.name.split(".")[1:]))


def test_every_public_module_says_what_it_exports():
    """Every public module of the library defines __all__, and every name in it exists; `dir(gpuio)` shows the
    public names only (no importlib, no helper)."""
    pytest.importorskip("torch_geometric")
    import warnings

    import gpuio

    missing, absent = [], []
    for name in _library_modules():
        module = importlib.import_module(name)
        if not isinstance(getattr(module, "__all__", None), (list, tuple)):
            missing.append(name)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)  # no deprecated name is exported
            absent += [f"{name}.{n}" for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"no __all__: {missing}"
    assert not absent, f"in __all__ but not defined: {absent}"
    assert len(_library_modules()) > 40
    assert "importlib" not in dir(gpuio) and "TYPE_CHECKING" not in dir(gpuio)
    assert set(dir(gpuio)) == set(gpuio.__all__) | {"__version__"} and {"TensorFile", "TableCache"} <= set(dir(gpuio))


def test_old_names_warn_and_are_the_new_objects():
    """The single-table cache was gpuio.FeatureStore (a name PyG users took for PyG's FeatureStore) and the Python GPU
    side gpuio.gpu.GpuPath (C++ said GpuRuntime): for one release the old names are the same objects, with a
    DeprecationWarning naming the new one; neither is exported."""
    pytest.importorskip("torch")
    import gpuio
    import gpuio.cache
    import gpuio.gpu

    for module, old, new, says in ((gpuio, "FeatureStore", "TableCache", "gpuio.pyg.PygFeatureStore"),
                                   (gpuio.cache, "FeatureStore", "TableCache", "gpuio.pyg.PygFeatureStore"),
                                   (gpuio.gpu, "GpuPath", "GpuRuntime", "gpuio.gpu.GpuRuntime")):
        with pytest.warns(DeprecationWarning, match=f"{module.__name__}.{old} is deprecated: use ") as w:
            value = getattr(module, old)
        assert value is getattr(module, new) and says in str(w[0].message), w[0].message
        assert w[0].filename == __file__  # the warning points at the caller
        assert old not in module.__all__ and new in module.__all__
