"""The single-writer lease (RBD's exclusive lock) and fencing, with writers in separate processes."""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from gpuio import volumes
from volumes_util import admin, fresh

CHILD = str(Path(__file__).with_name("volumes_child.py"))


def _writer(cluster, volume, mode):
    """Start volumes_child.py; returns once it holds the lock and wrote block 0 (0xAA)."""
    p = subprocess.Popen([sys.executable, CHILD, cluster.conf, volume, mode], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    line = p.stdout.readline().strip()
    assert line == "ready", f"writer did not start: {line!r}"
    return p


def _state(pid):
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


def _block(v, who, b):
    with volumes.open(v, "r", who=who) as eng:
        out = np.empty(4096, np.uint8)
        eng.read([b], out)
    return out


def test_second_writer_refused_at_once_readers_free(ceph_cluster):
    who = admin(ceph_cluster)
    v = volumes.create(fresh("lease"), 1 << 20, who=who)
    p = _writer(ceph_cluster, v, "hold")
    try:
        with pytest.raises(OSError) as e:
            volumes.open(v, "r+", who=who)
        # at once: the owner was seen before any lock request (librbd's own request would wait for the owner),
        # named, and no time was waited (lock_wait_s=0)
        assert e.value.errno == errno.EBUSY and v in str(e.value) and "break_lock" in str(e.value)
        assert "owner unknown" not in str(e.value) and "waited 0 ms" in str(e.value), str(e.value)
        assert volumes.lock_owners(v, who=who), "the writer's lock is not visible"
        assert (_block(v, who, 0) == 0xAA).all()  # readers need no lock
    finally:
        p.kill()
        p.wait()


def test_writer_waits_for_the_lock_with_a_timeout(ceph_cluster):
    who = admin(ceph_cluster)
    v = volumes.create(fresh("wait"), 1 << 20, who=who)
    first = volumes.open(v, "r+", who=who)
    t0 = time.monotonic()
    with pytest.raises(OSError, match="waited 500 ms"):
        volumes.open(v, "r+", who=who, lock_wait_s=0.5)
    assert time.monotonic() - t0 >= 0.5  # it did wait (a lower bound: a loaded box only makes it longer)
    threading.Timer(0.5, first.close).start()
    with volumes.open(v, "r+", who=who, lock_wait_s=20) as second:  # granted once the first closes
        second.write([2], np.full(4096, 7, np.uint8))
    assert (_block(v, who, 2) == 7).all()


def test_killed_writer_is_taken_over(ceph_cluster):
    who = admin(ceph_cluster)
    v = volumes.create(fresh("kill"), 1 << 20, who=who)
    p = _writer(ceph_cluster, v, "hold")
    dead_owner = volumes.lock_owners(v, who=who)
    p.send_signal(signal.SIGKILL)
    p.wait()
    with volumes.open(v, "r+", who=who, break_lock=True) as eng:
        eng.write([0], np.full(4096, 0xBB, np.uint8))
        assert volumes.lock_owners(v, who=who) != dead_owner
    assert (_block(v, who, 0) == 0xBB).all()
    blocklist = ceph_cluster.mon({"prefix": "osd blocklist ls"})
    assert dead_owner[0] in str(blocklist), (dead_owner, blocklist)  # fenced: its late writes are refused


def test_paused_writer_is_fenced(ceph_cluster):
    """SIGSTOP a writer, take its lock over, SIGCONT it: its next write is refused by the OSDs and never
    lands; the new writer's data stays."""
    who = admin(ceph_cluster)
    v = volumes.create(fresh("fence"), 1 << 20, who=who)
    p = _writer(ceph_cluster, v, "stop")
    try:
        deadline = time.monotonic() + 60  # bounds a hang only
        while _state(p.pid) != "T":
            assert time.monotonic() < deadline, "writer did not stop itself in 60 s"
            time.sleep(0.02)
        with volumes.open(v, "r+", who=who, break_lock=True) as eng:
            eng.write([0, 1], np.full(8192, 0xBB, np.uint8))
            p.send_signal(signal.SIGCONT)
            out, _ = p.communicate(timeout=60)
            assert out.startswith("late-write refused"), out
            assert int(out.split()[2]) == errno.ESHUTDOWN, out  # EBLOCKLISTED
            got = np.empty(8192, np.uint8)
            eng.read([0, 1], got)
            assert (got == 0xBB).all(), "a fenced writer's late write landed"
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()
            p.wait()
