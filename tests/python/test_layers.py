"""The package's layer contract (issue 13): python/gpuio imports downward only, has no import loop, and
benchmarks/ and examples/ use public names only. Read from the source with ast (nothing is imported), so it
runs in a fraction of a second and sees imports inside functions too.

Tiers, bottom first. A module may import its own group and any group of a lower tier; groups of one tier
are siblings and do not import each other (streams/ sits on the engine beside the tensor files).
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PKG = ROOT / "python" / "gpuio"

TIERS: list[dict[str, tuple[str, ...]]] = [
    {"engine": ("_core", "defaults", "_index", "_buffers", "_npy", "_dtypes", "_blocklocks", "_forked", "_files",
                "future", "engine", "gpu", "sim")},
    {"tensor": ("tensor", "_rowplan", "device_array"), "streams": ("streams",), "safetensors": ("safetensors",)},
    {"rows": ("rows",), "volumes": ("volumes",)},
    {"cache": ("cache",)},
    {"graph": ("graph",)},
    {"pyg/loader": ("pyg", "loader")},
    {"apps": ("apps", "gnn", "data", "cli", "bench", "sysinfo", "sim_report", "__main__")},
]


def group_of(module: str) -> tuple[int, str] | None:
    """(tier, group) of a gpuio module; None for the package root (gpuio/__init__.py, lazy, imports nothing)."""
    parts = module.split(".")
    if parts == ["gpuio"]:
        return None
    for tier, groups in enumerate(TIERS):
        for group, tops in groups.items():
            if parts[1] in tops:
                return tier, group
    raise AssertionError(f"{module} belongs to no layer: add it to TIERS in {__file__}")


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    rel = pathlib.Path(*name.split(".")[1:]) if "." in name else pathlib.Path()
    base = PKG / rel
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file() or name.split(".")[-1] == "_core"


def imports_of(path: pathlib.Path, tree: ast.AST | None = None) -> list[tuple[int, str]]:
    """(line, gpuio module) for every import of a gpuio module in path, resolved to the module imported:
    `from gpuio import sim` is gpuio.sim, `from .store import X` is the sibling store module."""
    tree = tree or ast.parse(path.read_text(), str(path))
    mod = module_name(path) if PKG in path.parents else ""
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "gpuio"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[:len(pkg.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "gpuio":
                continue
            subs = [f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}")]
            found += [(node.lineno, s) for s in subs] or [(node.lineno, target)]
    return found


def backward_imports(files, sources: dict | None = None) -> list[str]:
    """Every import in files that goes up or sideways; sources: {path: text} read instead of the file."""
    bad = []
    for path in files:
        src = group_of(module_name(path))
        text = (sources or {}).get(path)
        for line, target in imports_of(path, ast.parse(text) if text is not None else None):
            dst = group_of(target)
            if src is None or dst is None or dst[1] == src[1] or dst[0] < src[0]:
                continue
            bad.append(f"{path.relative_to(ROOT)}:{line}: {module_name(path)} ({src[1]}, tier {src[0]}) imports "
                       f"{target} ({dst[1]}, tier {dst[0]}): layers import downward only")
    return bad


def package_files():
    return sorted(PKG.rglob("*.py"))


def test_layers_import_downward_only():
    bad = backward_imports(package_files())
    assert not bad, "\n" + "\n".join(bad)


def test_the_contract_catches_backward_imports():
    """The check itself can fail: the cache importing the pyg layer, and the tensor layer importing its
    sibling streams/, are reported (the source is altered in memory, not on disk)."""
    store = PKG / "cache" / "feature_store.py"
    tensor = PKG / "tensor.py"
    sources = {store: store.read_text() + "\nfrom gpuio.pyg.sampler import NeighborSampler\n",
               tensor: tensor.read_text() + "\ndef f():\n    from .streams import StreamStore\n"}
    bad = backward_imports([store, tensor], sources)
    assert len(bad) == 2, bad
    assert "imports gpuio.pyg.sampler (pyg/loader, tier 5)" in bad[0]
    assert "imports gpuio.streams (streams, tier 1)" in bad[1]


def test_no_import_loop():
    """No two package modules import each other, directly or through others (a package importing its own
    submodules from __init__ is not a loop: the submodule does not need the package's namespace)."""
    edges: dict[str, set[str]] = {}
    for path in package_files():
        mod = module_name(path)
        edges[mod] = {t for _, t in imports_of(path) if t != mod and not mod.startswith(t + ".")}
    index, low, stack, on_stack, loops = {}, {}, [], set(), []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                loops.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert not loops, f"import loops: {loops}"


@pytest.mark.parametrize("folder", ["benchmarks", "examples"])
def test_benchmarks_and_examples_use_public_names(folder):
    """No import of a private gpuio module or name (gpuio._x, from gpuio.m import _x) and no attribute that
    reaches into gpuio's privates (._core, ._engine, ...) in benchmarks/ and examples/."""
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for line, target in imports_of(path, tree):
            if any(p.startswith("_") for p in target.split(".")):
                bad.append(f"{path.relative_to(ROOT)}:{line}: imports {target}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpuio"):
                bad += [f"{path.relative_to(ROOT)}:{node.lineno}: imports {node.module}.{a.name}"
                        for a in node.names if a.name.startswith("_")]
            elif (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                  and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    assert not bad, "\n" + "\n".join(bad)


def test_every_top_level_name_resolves():
    """Each name gpuio loads on first use (gpuio.Engine, gpuio.info, gpuio.streams, ...) names a module and an
    attribute that exist (gpuio.info once pointed at a module that did not)."""
    import gpuio

    for name in sorted(gpuio._LAZY) + sorted(gpuio._SUBMODULES):
        if name in ("pyg", "gnn", "bench", "apps", "volumes", "data", "loader", "graph", "cache"):
            pytest.importorskip("torch")
        assert getattr(gpuio, name) is not None, name
    assert callable(gpuio.info) and callable(gpuio.aligned_empty)
