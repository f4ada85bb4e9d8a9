"""gpuio_apps.bench.memlimit on this machine's cgroups (v1 on the 2-core machines, v2 on the GPU machine): a
file read inside a limit stays out of the page cache beyond the limit. Skipped where no cgroup can be made
(not root), saying why."""
import json
import os
import subprocess
import sys

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


# Run in a fresh interpreter: the group then holds a process that does nothing else, so its figures are this
# script's own (in the test runner's process, other threads allocating or freeing inside the window moved them).
_GROUP_FIGURES = r"""
import json, sys
import numpy as np
from gpuio_apps.bench.memlimit import MemoryLimit

lim = MemoryLimit.enter("gpuio-test")
if lim is None:
    print(json.dumps({"skip": MemoryLimit.why}))
    sys.exit(0)
try:
    here = MemoryLimit.current()
    r = {"same": here is not None and (here.path, here.version) == (lim.path, lim.version),
         "effective_before": here.effective_limit_bytes()}
    buf = np.ones(48 << 20, dtype=np.uint8)  # 48 MiB touched, charged to the group
    r.update(usage=lim.usage_bytes(), anon=lim.anon_bytes(), high=lim.peak_bytes())
    del buf
    lim.reset_peak()  # the peak from now on: without the 48 MiB freed before
    r["peak_after_reset"] = lim.peak_bytes()
    lim.set(lim.usage_bytes() + (64 << 20))
    r.update(limit=lim.limit_bytes(), effective=here.effective_limit_bytes())
    lim.unset()
    r["limit_after_unset"] = lim.limit_bytes()
finally:
    lim.leave()
print(json.dumps(r))
"""


def test_current_group_usage_peak_reset_and_unset():
    """What the hetero demo reads of a group: the one the process is in (current), its usage now, its peak since
    a reset (a run's steps), and a limit removed again (unset)."""
    out = subprocess.run([sys.executable, "-c", _GROUP_FIGURES], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.splitlines()[-1])
    if "skip" in r:
        pytest.skip(r["skip"])
    assert r["same"] and r["effective_before"] is None  # no limit on the group nor above it here
    assert r["usage"] >= 48 << 20 and r["anon"] >= 40 << 20
    assert r["peak_after_reset"] < r["high"] - (32 << 20)
    assert r["limit"] is not None and r["effective"] == r["limit"]
    assert r["limit_after_unset"] is None


def _group_of(pid: int, lim: MemoryLimit) -> str:
    """The path of pid's group in lim's hierarchy."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if (lim.version == 2 and controllers == "") or (lim.version == 1 and "memory" in controllers.split(",")):
                return os.path.join(os.path.dirname(lim.path) if lim.version == 1 else "/sys/fs/cgroup", path.lstrip("/"))
    raise AssertionError(f"pid {pid} is in no {lim.version} memory group")


def test_children_started_outside_stay_out_and_leave_takes_every_process_home():
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
