"""Shared pytest fixtures.

ceph_cluster (session): one throwaway one-node Ceph cluster per test run (gpuio_apps.cluster: mon, mgr,
3 BlueStore-on-file OSDs, replicas 2), started on first use (~30 s) and stopped at the end. Skipped, with
the reason, only where the Ceph packages or gpuio's rbd backend are absent (scripts/setup.sh installs them).
GPUIO_TEST_CEPH_CONF=<ceph.conf of a running gpuio cluster> reuses that one instead (it is left running).

fast_device (session): a RAM-backed loop device with ext4 (gpuio_apps.bench.fastdev: 1 GiB on /dev/shm, direct
I/O to its image), mounted in a temporary folder and removed at the end; skipped, with the reason, where it cannot
be made (not root, no losetup or loop support, no room in RAM or /dev/shm). GPUIO_TEST_FAST_GIB sizes it.

one_thread: torch computes on one thread for the test (tiny ops: more threads only spin on the shared CI cores).

Every test that uses ceph_cluster (directly or through another fixture) is marked `ceph` here, so `pytest -m ceph`
and `-m "not ceph"` choose by what a test needs rather than by where it lives (markers: pyproject.toml).
"""
from __future__ import annotations

import os

import pytest


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by markers
def pytest_collection_modifyitems(items):
    for item in items:
        if "ceph_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ceph)


@pytest.fixture(scope="session")
def ceph_cluster():
    from gpuio import _core
    from gpuio_apps import cluster

    if _core.rbd_unavailable():
        pytest.skip(_core.rbd_unavailable())
    missing = cluster.missing_tools()
    if missing:
        pytest.skip(f"Ceph programs absent: {missing} (Debian packages {' '.join(cluster.PACKAGES)}; "
                    "scripts/setup.sh installs them as root)")
    reuse = os.environ.get("GPUIO_TEST_CEPH_CONF")
    if reuse:
        yield cluster.load(os.path.dirname(os.path.abspath(reuse)))
        return
    # $TMPDIR, or the build tree where $TMPDIR is tmpfs (BlueStore needs O_DIRECT)
    d = cluster.make_dir("gpuio-test-ceph-", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
    c = cluster.up(d, osds=3)
    try:
        yield c
    finally:
        cluster.down(d)


@pytest.fixture(scope="session")
def fast_device(tmp_path_factory):
    from gpuio_apps.bench import fastdev

    why = fastdev.unusable()
    if why:
        pytest.skip(why)
    image = f"{fastdev.SHM}/gpuio-fast-test-{os.getpid()}.img"
    try:
        dev = fastdev.make(str(tmp_path_factory.mktemp("fast-device")), image=image,
                           size_bytes=int(float(os.environ.get("GPUIO_TEST_FAST_GIB", "1")) * fastdev.GIB))
    except fastdev.FastDeviceError as e:
        pytest.skip(f"no fast device: {e}")
    try:
        yield dev
    finally:
        dev.remove()


@pytest.fixture
def one_thread():
    import torch
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
