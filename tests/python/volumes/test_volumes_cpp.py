"""Runs the C++ rbd backend tests (tests/cpp/test_io_rbd.cpp, GoogleTest) against the session's Ceph
cluster: under ctest alone they skip for want of a cluster."""
from __future__ import annotations

import os
import subprocess

import pytest

from repo_scripts import ROOT



def _binary():
    found = sorted((ROOT / "build").glob("*/tests/cpp/gpuio_tests"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def test_cpp_rbd_suite_against_the_cluster(ceph_cluster):
    exe = _binary()
    if exe is None:
        pytest.skip("the GoogleTest binary is not built (scripts/setup.sh --test builds it under build/)")
    r = subprocess.run([str(exe), "--gtest_filter=Rbd.*", "--gtest_brief=1"], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, GPUIO_TEST_CEPH_CONF=ceph_cluster.conf))
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    listed = subprocess.run([str(exe), "--gtest_list_tests", "--gtest_filter=Rbd.*"], capture_output=True,
                            text=True).stdout
    n = sum(1 for line in listed.splitlines() if line.startswith("  "))
    assert n >= 5 and "[  SKIPPED ]" not in r.stdout, f"the C++ rbd tests did not all run:\n{r.stdout[-3000:]}"
    assert f"[  PASSED  ] {n} tests." in r.stdout, r.stdout[-3000:]
