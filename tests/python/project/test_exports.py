"""gpuio._core exports its entry point, not the code static archives brought in.

On the GPU machine the module once carried and exported a copy of libstdc++'s std::locale: whichever library
loaded libstdc++ into _core's link group bound to it, and torch's first stringstream died in free() (and a RADOS
client crashed with SIGSEGV). `--exclude-libs,ALL` (cpp/src/bindings/CMakeLists.txt) keeps archive code local;
weak template instantiations of the module's own objects (identical wherever they come from) stay visible.
"""
from __future__ import annotations

import shutil
import subprocess

import pytest

import gpuio._core as core


def _exports() -> list[tuple[str, str]]:
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed")
    out = subprocess.run([nm, "-D", "--defined-only", "-C", core.__file__], capture_output=True, text=True,
                         check=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            rows.append((parts[1], parts[2]))
    return rows


def test_only_the_module_entry_point_is_a_strong_export():
    strong = sorted(name for kind, name in _exports() if kind in ("T", "D", "B", "R"))
    assert strong == ["PyInit__core"], strong[:20]


def test_no_libstdcxx_runtime_internals_are_exported():
    leaked = [name for _, name in _exports() if "std::locale" in name or "std::ios_base" in name]
    assert not leaked, leaked[:10]
