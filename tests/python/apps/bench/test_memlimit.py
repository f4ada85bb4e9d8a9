"""gpuio_apps.bench.memlimit on this machine's cgroups (v1 on the 2-core machines, v2 on the GPU machine): a
file read inside a limit stays out of the page cache beyond the limit. Skipped where no cgroup can be made
(not root), saying why."""
import os

import numpy as np
import pytest

from gpuio_apps.bench.memlimit import MemoryLimit, drop_file_cache


def test_page_cache_stays_under_the_limit(tmp_path):
    path = tmp_path / "f.bin"
    np.random.default_rng(0).integers(0, 255, 96 << 20, dtype=np.uint8).tofile(path)
    lim = MemoryLimit.enter("gpuio-test")
    if lim is None:
        pytest.skip(MemoryLimit.why)
    try:
        drop_file_cache(str(path))
        lim.set(lim.anon_bytes() + (24 << 20))
        assert lim.limit_bytes() is not None and "limit" in lim.describe()
        m = np.memmap(path, mode="r")
        total = sum(int(m[i:i + (8 << 20)].sum()) for i in range(0, m.size, 8 << 20))  # every page once
        assert total > 0
        assert lim.cache_bytes() <= lim.limit_bytes()  # the 96 MiB file did not stay cached
        assert lim.cache_bytes() < 64 << 20
    finally:
        lim.leave()
    with open("/proc/self/cgroup") as f:
        assert os.path.basename(lim.path) not in f.read()  # back in the group it came from


def test_drop_file_cache_without_root_evicts_the_file(tmp_path):
    path = tmp_path / "g.bin"
    path.write_bytes(b"x" * (1 << 20))
    assert drop_file_cache(str(path))  # says what it did, as root or not


def test_current_group_usage_peak_reset_and_unset():
    """What the hetero demo reads of a group: the one the process is in (current), its usage now, its peak since
    a reset (a run's steps), and a limit removed again (unset)."""
    lim = MemoryLimit.enter("gpuio-test")
    if lim is None:
        pytest.skip(MemoryLimit.why)
    try:
        here = MemoryLimit.current()
        assert here is not None and here.path == lim.path and here.version == lim.version
        assert here.effective_limit_bytes() is None  # no limit on the group nor above it here
        buf = np.ones(48 << 20, dtype=np.uint8)  # 48 MiB touched, charged to the group
        assert lim.usage_bytes() >= 48 << 20 and lim.anon_bytes() >= 40 << 20
        high = lim.peak_bytes()
        del buf
        lim.reset_peak()  # the peak from now on: below the 48 MiB held before
        assert lim.peak_bytes() < high - (32 << 20)
        lim.set(lim.usage_bytes() + (64 << 20))
        assert lim.limit_bytes() is not None and here.effective_limit_bytes() == lim.limit_bytes()
        lim.unset()
        assert lim.limit_bytes() is None
    finally:
        lim.leave()


def _group_of(pid: int, lim: MemoryLimit) -> str:
    """The path of pid's group in lim's hierarchy."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if (lim.version == 2 and controllers == "") or (lim.version == 1 and "memory" in controllers.split(",")):
                return os.path.join(os.path.dirname(lim.path) if lim.version == 1 else "/sys/fs/cgroup", path.lstrip("/"))
    raise AssertionError(f"pid {pid} is in no {lim.version} memory group")


def test_children_started_outside_stay_out_and_leave_takes_every_process_home():
    import subprocess

    lim = MemoryLimit.enter("gpuio-test-out")
    if lim is None:
        pytest.skip(MemoryLimit.why)
    children = []
    try:
        with lim.outside():  # e.g. sampling workers that hold none of the limited data
            children.append(subprocess.Popen(["sleep", "60"]))
        children.append(subprocess.Popen(["sleep", "60"]))  # started inside
        assert os.path.realpath(_group_of(children[0].pid, lim)) == os.path.realpath(lim.home)
        assert os.path.realpath(_group_of(children[1].pid, lim)) == os.path.realpath(lim.path)
        assert os.path.realpath(_group_of(os.getpid(), lim)) == os.path.realpath(lim.path)  # back inside
    finally:
        lim.leave()
        for c in children:
            c.kill()
            c.wait()
    assert not os.path.exists(lim.path)  # the child left inside went home with us: the group could go
