"""The import contracts. gpuio is the library and gpuio_apps its applications (docs/DESIGN.md, "Library and
applications"): the library imports nothing of the applications, its layers import downward only, and the
applications, benchmarks/ and examples/ use the library's public names only.

import-linter checks the import graph against the contracts in pyproject.toml ([tool.importlinter]): this file runs
`lint-imports` on the tree, and on a copy of it with one forbidden import added, which must fail. What import-linter
cannot see is checked here from the source with ast (nothing is imported): attribute chains through the package
(`import gpuio` then `gpuio.pyg.sampler`), `import_module("gpuio....")` strings, imports under TYPE_CHECKING (which the
contracts leave out), import loops, private names. The layers come from the contract, so there is one list of them.
"""
from __future__ import annotations

import ast
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from repo_scripts import ROOT

try:
    import tomllib
except ImportError:  # Python 3.10: import-linter brings tomli
    import tomli as tomllib

SRC = ROOT / "python"
PKG = SRC / "gpuio"
APPS = SRC / "gpuio_apps"
ROOTS = ("gpuio", "gpuio_apps")
IMPORT_LINTER = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
CONTRACTS = {c["id"]: c for c in IMPORT_LINTER["contracts"]}
# The one application module allowed the library's private pieces: it times them one by one (block_ids, a
# binding's argument conversion), a profile of the library's own code for the GPU machine's latency table.
WHITE_BOX = {"gpuio_apps.bench.latency_parts": {"gpuio._buffers", "gpuio._core"}}


def _layers() -> list[list[tuple[str, ...]]]:
    """The layers contract as tiers, bottom first: each tier a list of groups, each group the top-level names of
    gpuio whose modules may import each other ("a : b" is one group, "a | b" two sibling groups)."""
    tiers = []
    for layer in reversed(CONTRACTS["layers"]["layers"]):
        if "|" in layer:
            tiers.append([(name.strip(),) for name in layer.split("|")])
        else:
            tiers.append([tuple(name.strip() for name in layer.split(":"))])
    return tiers


TIERS = _layers()
FIRST_PYTHON_LAYER = 4  # docs/DESIGN.md numbers the C++ layers 0-3 and the Python tiers from 4, bottom first
INDEPENDENT = {(a, b) for a in CONTRACTS["siblings"]["modules"] for b in CONTRACTS["siblings"]["modules"] if a != b}


def group_of(module: str) -> tuple[int, tuple[str, ...]] | None:
    """(tier, group) of a gpuio module; None for the package root (gpuio/__init__.py: lazy, imports nothing) and
    for gpuio_apps, which is no layer of the library."""
    parts = module.split(".")
    if parts[0] != "gpuio" or len(parts) == 1:
        return None
    if parts[1] == "_core":  # the C++ core: below everything
        return 0, ("_core",)
    for tier, groups in enumerate(TIERS):
        for group in groups:
            if parts[1] in group:
                return tier, group
    raise AssertionError(f"{module} belongs to no layer: add it to the layers contract in pyproject.toml")


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = SRC / pathlib.Path(*name.split("."))
    return (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()
            or name in ("gpuio._core", "gpuio_apps._raw"))


def _top(name: str) -> str:
    """The longest prefix of a dotted name that is a module (gpuio.pyg.sampler.NeighborSampler -> gpuio.pyg.sampler)."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if _is_module(".".join(parts[:n])):
            return ".".join(parts[:n])
    return parts[0]


def imports_of(path: pathlib.Path, tree: ast.AST | None = None) -> list[tuple[int, str]]:
    """(line, module) for every import of a gpuio or gpuio_apps module in path, resolved to the module imported:
    `from gpuio import sim` is gpuio.sim, `from .store import X` is the sibling store module."""
    tree = tree or ast.parse(path.read_text(), str(path))
    mod = module_name(path) if SRC in path.parents else ""
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] in ROOTS]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[:len(pkg.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] not in ROOTS:
                continue
            subs = [f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}")]
            found += [(node.lineno, s) for s in subs] or [(node.lineno, target)]
    return found


def hidden_imports(path: pathlib.Path, tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, module, how) for what import-linter does not see as an import: `gpuio.X.Y` attribute chains on a
    name bound to the package, and import_module("gpuio...") / __import__ strings."""
    package_names = set()  # names bound to the package root: `import gpuio`, `import gpuio.x`, `import gpuio as g`
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in ROOTS:
                    package_names.add(a.asname if a.asname and "." not in a.name else a.name.split(".")[0])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not isinstance(getattr(node, "parent", None), ast.Attribute):
            chain, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                chain.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in package_names:
                root = value.id if value.id in ROOTS else "gpuio"
                target = _top(".".join([root] + chain))
                if target != root:
                    found.append((node.lineno, target, f"attribute {value.id}.{'.'.join(chain)}"))
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str) and node.args[0].value.split(".")[0] in ROOTS:
                found.append((node.lineno, _top(node.args[0].value), f"{name}({node.args[0].value!r})"))
    return found


def _parse(path: pathlib.Path, text: str | None = None) -> ast.AST:
    tree = ast.parse(text if text is not None else path.read_text(), str(path))
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child.parent = node  # type: ignore[attr-defined]
    return tree


def _type_checking_imports(path: pathlib.Path, tree: ast.AST) -> list[tuple[int, str]]:
    blocks = [n for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)]
    return [(line, t) for b in blocks for line, t in imports_of(path, ast.Module(body=b.body, type_ignores=[]))]


def contract_breaches(files, sources: dict | None = None) -> list[str]:
    """What the contracts forbid but import-linter cannot see, in the library's files: a hidden import (see
    hidden_imports) or a TYPE_CHECKING import of an application module or of a higher or sibling layer."""
    bad = []
    for path in files:
        mod = module_name(path)
        src = group_of(mod)
        tree = _parse(path, (sources or {}).get(path))
        found = hidden_imports(path, tree) + [(line, t, "import under TYPE_CHECKING")
                                              for line, t in _type_checking_imports(path, tree)]
        for line, target, how in found:
            where = f"{path.relative_to(ROOT)}:{line}: {mod}: {how}"
            if target.split(".")[0] == "gpuio_apps":
                bad.append(f"{where} reaches {target}: the library imports nothing of its applications")
                continue
            dst = group_of(target)
            if src is None or dst is None or dst[1] == src[1]:
                continue
            if dst[0] >= src[0] or (".".join(mod.split(".")[:2]), ".".join(target.split(".")[:2])) in INDEPENDENT:
                bad.append(f"{where} reaches {target} (layer {dst[0] + FIRST_PYTHON_LAYER}) from layer "
                           f"{src[0] + FIRST_PYTHON_LAYER}: layers import downward only")
    return bad


def library_files():
    return sorted(PKG.rglob("*.py"))


def _lint_imports(tree_root: pathlib.Path) -> subprocess.CompletedProcess:
    """lint-imports on the packages under tree_root/python with tree_root/pyproject.toml's contracts. The editable
    install's import hook would hand over this checkout's gpuio whatever the path says, so the child drops every
    meta-path finder but the path finder's before import-linter looks the packages up."""
    code = ("import sys\nfrom importlib.machinery import PathFinder\n"
            f"sys.path.insert(0, {str(tree_root / 'python')!r})\n"
            "sys.meta_path[:] = [f for f in sys.meta_path if f is PathFinder or f.find_spec('gpuio', None) is None]\n"
            "from importlinter.cli import lint_imports_command\n"
            f"sys.argv = ['lint-imports', '--no-cache', '--no-logo', {str(tree_root / 'pyproject.toml')!r}]\n"
            "lint_imports_command()\n")
    return subprocess.run([sys.executable, "-c", code], cwd=tree_root, capture_output=True, text=True, timeout=120)


def test_import_contracts_hold():
    pytest.importorskip("importlinter")
    r = _lint_imports(ROOT)
    assert r.returncode == 0 and f"Contracts: {len(CONTRACTS)} kept, 0 broken." in r.stdout, r.stdout + r.stderr
    assert "(1 ignored import)" in r.stdout  # the launcher, and only it: see the contract's ignore_imports


@pytest.mark.parametrize("module, line, contract, report", [
    ("cache/page_cache.py", "from gpuio_apps.cli import main", "library", "gpuio.cache.page_cache -> gpuio_apps.cli"),
    ("tensor.py", "from gpuio.pyg import sampler", "layers", "gpuio.tensor -> gpuio.pyg.sampler"),
    ("device_array.py", "from gpuio.streams import store", "siblings", "gpuio.device_array -> gpuio.streams.store"),
    ("cache/table_cache.py", "from gpuio_apps.bench.belady import store_vs_min", "lab",
     "gpuio.cache.table_cache -> gpuio_apps.bench.belady"),
])
def test_import_contracts_shown_failing(tmp_path, module, line, contract, report):
    """The contracts on a copy of the tree (the Python packages and pyproject.toml) with one forbidden import added
    inside a function, where a lazy import would hide: lint-imports fails, naming the contract and the import."""
    pytest.importorskip("importlinter")
    shutil.copytree(SRC, tmp_path / "python", ignore=shutil.ignore_patterns("__pycache__", "*.so", "datasets"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    target = tmp_path / "python" / "gpuio" / module
    target.write_text(target.read_text() + f"\n\ndef _injected():\n    {line}\n")
    r = _lint_imports(tmp_path)
    out = r.stdout + r.stderr
    broken_count = 2 if contract == "lab" else 1  # a lab module is an application module too: "library" breaks
    assert r.returncode == 1 and f"Contracts: {len(CONTRACTS) - broken_count} kept, {broken_count} broken." in out, out
    broken = " ".join(out.split("Broken contracts")[1].split())  # the report wraps long names
    assert " ".join(CONTRACTS[contract]["name"].split(";")[0].split()) in broken, out
    assert report in out, out


def test_every_library_module_is_in_a_layer():
    """import-linter constrains only the modules a layer names: a new module must be given its place."""
    tops = {p.stem if p.is_file() else p.name for p in PKG.iterdir()
            if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()}
    named = {m for tier in TIERS for group in tier for m in group}
    assert tops == named, f"not in the layers contract: {sorted(tops - named)}; no such module: {sorted(named - tops)}"


def test_design_numbers_the_python_layers_as_the_contract_orders_them():
    """docs/DESIGN.md's numbered Python layers (4-10) are the layers contract's tiers, bottom first: every library
    module an item names belongs to that item's tier, so the document, the README's table (which takes DESIGN's
    numbers) and the import graph speak of one stack."""
    import re

    text = (ROOT / "docs" / "DESIGN.md").read_text()
    python = text.split("Python (`python/gpuio`), bottom first:")[1].split("On top, outside the library")[0]
    items = re.split(r"^(\d+)\. ", python, flags=re.M)[1:]
    numbered = {int(n): body for n, body in zip(items[::2], items[1::2])}
    assert sorted(numbered) == list(range(FIRST_PYTHON_LAYER, FIRST_PYTHON_LAYER + len(TIERS) - 1))
    tops = {m for tier in TIERS for group in tier for m in group}
    for n, body in numbered.items():
        named = {m for m in re.findall(r"`(?:gpuio\.)?(_?[a-z_]+)[`.(]", body) if m in tops} - {"__main__"}
        tier = {m for group in TIERS[n - FIRST_PYTHON_LAYER] for m in group}
        assert named and named <= tier, (n, sorted(named - tier), sorted(tier))


def test_every_library_module_serves_the_library():
    """No room of the library only the tests or the benchmarks use: every module below a top-level one is imported
    by another module of the library (its package's __init__, a sibling, a layer above). A piece that only measures
    or tests the library (Belady's MIN, a fault campaign, the demos' baselines) belongs to gpuio_apps or tests/."""
    imported = {m for path in library_files() for _, m in imports_of(path)}
    inner = {module_name(p) for p in PKG.rglob("*.py") if len(p.relative_to(PKG).parts) > 1}
    inner -= {m for m in inner if m.count(".") == 1}  # top-level packages: gpuio.__init__'s _SUBMODULES
    unused = sorted(m for m in inner if m not in imported)
    assert not unused, f"library modules nothing in the library imports: {unused}"


def test_no_hidden_imports_break_the_contracts():
    bad = contract_breaches(library_files())
    assert not bad, "\n" + "\n".join(bad)


def test_the_hidden_import_check_can_fail():
    """The cache reaching the pyg layer through the package (an attribute chain, an import_module string), the
    tensor layer naming an application module, and a TYPE_CHECKING import of one, are all reported (the sources
    are altered in memory, not on disk)."""
    store = PKG / "cache" / "table_cache.py"
    tensor = PKG / "tensor.py"
    sources = {store: store.read_text() + "\nimport gpuio\n\n\ndef f():\n    return gpuio.pyg.sampler.NeighborSampler\n"
                      "\n\ndef g():\n    import importlib\n    return importlib.import_module('gpuio.pyg')\n",
               tensor: tensor.read_text() + "\nif TYPE_CHECKING:\n    from gpuio_apps import gnn\n"
                       "\n\ndef h():\n    return __import__('gpuio_apps.cli')\n"}
    bad = contract_breaches([store, tensor], sources)
    assert len(bad) == 4, bad
    assert "attribute gpuio.pyg.sampler.NeighborSampler reaches gpuio.pyg.sampler" in bad[0]
    assert "import_module('gpuio.pyg') reaches gpuio.pyg (layer 10) from layer 8" in bad[1]
    assert all("the library imports nothing of its applications" in b for b in bad[2:]), bad


def test_no_import_loop():
    """No two modules import each other, directly or through others (a package importing its own submodules
    from __init__ is not a loop: the submodule does not need the package's namespace)."""
    edges: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        if path.parts[len(SRC.parts)] not in ROOTS:
            continue
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


def _private(name: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in name.split("."))


def private_uses(path: pathlib.Path, tree: ast.AST, strict: bool) -> list[str]:
    """Private gpuio (or gpuio_apps) modules and names path uses: imported (gpuio._x, from gpuio.m import _x), or
    reached through a name bound to a gpuio module (gpuio._core, tensor._aligned_bytes). strict: any `._x`
    attribute not on self or cls counts too (benchmarks and examples, which have no privates of their own)."""
    rel = path.relative_to(ROOT)
    allowed = WHITE_BOX.get(module_name(path), set()) if APPS in path.parents else set()
    bad = [f"{rel}:{line}: imports {t}" for line, t in imports_of(path, tree) if _private(t) and t not in allowed
           and not (APPS in path.parents and t.startswith("gpuio_apps."))]
    modules = {}  # local name -> gpuio module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ROOTS and node.level == 0:
            own = APPS in path.parents and node.module.startswith("gpuio_apps")  # the applications' own privates
            bad += [f"{rel}:{node.lineno}: imports {node.module}.{a.name}" for a in node.names
                    if _private(a.name) and f"{node.module}.{a.name}" not in allowed and not own]
            modules.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
                            if _is_module(f"{node.module}.{a.name}")})
        elif isinstance(node, ast.Import):
            modules.update({(a.asname or a.name).split(".")[0]: a.name.split(".")[0] if not a.asname else a.name
                            for a in node.names if a.name.split(".")[0] == "gpuio"})
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        base = node.value
        while isinstance(base, ast.Attribute):
            base = base.value
        on_gpuio = isinstance(base, ast.Name) and modules.get(base.id, "").startswith("gpuio")
        if (strict or on_gpuio) and _top(f"{modules.get(getattr(base, 'id', ''), '')}.{node.attr}") not in allowed:
            bad.append(f"{rel}:{node.lineno}: .{node.attr}")
    return bad


@pytest.mark.parametrize("folder", ["python/gpuio_apps", "benchmarks", "examples"])
def test_applications_benchmarks_and_examples_use_public_names(folder):
    """No import of a private gpuio module or name (gpuio._x, from gpuio.m import _x) and no attribute that
    reaches into gpuio's privates (gpuio._core, ._engine, ...) in the applications, benchmarks/ and examples/."""
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        bad += private_uses(path, ast.parse(path.read_text(), str(path)), strict=folder != "python/gpuio_apps")
    assert not bad, "\n" + "\n".join(bad)


def test_the_public_name_check_can_fail():
    path = APPS / "papers" / "pipeline.py"
    tree = ast.parse(path.read_text() + "\nfrom gpuio.tensor import _aligned_bytes\nfrom gpuio import _core, tensor\n"
                                        "\n\ndef f():\n    return _core.cuda_built, tensor._table_policy()\n")
    bad = private_uses(path, tree, strict=False)
    assert [b.split(": ", 1)[1] for b in bad] == ["imports gpuio._core", "imports gpuio.tensor._aligned_bytes",
                                                 "imports gpuio._core", "._table_policy"], bad


def test_the_library_loads_no_application():
    """Every library module imported, in a fresh interpreter: not one gpuio_apps module is loaded."""
    pytest.importorskip("torch_geometric")
    code = ("import importlib, pkgutil, sys, gpuio\n"
            "mods = [m.name for m in pkgutil.walk_packages(gpuio.__path__, 'gpuio.') if m.name != 'gpuio.__main__']\n"
            "for m in mods:\n    importlib.import_module(m)\n"
            "print(len(mods), sorted(m for m in sys.modules if m.split('.')[0] == 'gpuio_apps'))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert r.returncode == 0, r.stderr
    count, loaded = r.stdout.split(" ", 1)
    assert int(count) > 40 and loaded.strip() == "[]", r.stdout


def test_every_top_level_name_resolves():
    """Each name gpuio loads on first use (gpuio.Engine, gpuio.info, gpuio.streams, ...) names a module and an
    attribute that exist (gpuio.info once pointed at a module that did not); a module that moved to the
    applications' package says where it went."""
    import gpuio

    for name in gpuio.__all__:
        if name in ("pyg", "volumes", "loader", "graph", "cache", "TableCache"):
            pytest.importorskip("torch")
        assert getattr(gpuio, name) is not None, name
    assert callable(gpuio.info) and callable(gpuio.aligned_empty)
    with pytest.raises(AttributeError, match="import gpuio_apps.gnn"):
        gpuio.gnn  # noqa: B018
