"""OSD faults under a gpuio stream at replicas 2 (osd_faults.py): nothing acknowledged is lost.
Seeded and bounded (each batch fails after io_timeout_s; recovery waits are bounded). The >= 50-run
campaign is tests/python/volumes/volumes_fault_campaign.py; here one run of each kind keeps CI short."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import osd_faults as faults
from volumes_util import admin

SCRIPT = Path(__file__).resolve().parent / "volumes_fault_campaign.py"


def test_osd_kill_campaign_script_loses_nothing(ceph_cluster):
    """kill -9 one OSD mid-stream, restart it, wait for recovery: every acknowledged write reads back."""
    r = subprocess.run([sys.executable, str(SCRIPT), "--runs", "1", "--seed", "7", "--conf", ceph_cluster.conf],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert r.returncode == 0, r.stdout + r.stderr
    run = json.loads(r.stdout.splitlines()[0])
    summary = json.loads(r.stdout.splitlines()[-1].split(" ", 1)[1])
    assert run["mode"] == "kill" and run["osd"] in ceph_cluster.osds
    assert run["acked_writes"] > 0 and run["lost"] == 0 and summary == dict(summary, runs=1, lost=0)
    assert ceph_cluster.health()["osds_up"] == len(ceph_cluster.osds)


def test_osd_out_recovery_loses_nothing(ceph_cluster):
    """`ceph osd out` one OSD: its PGs recover onto the other two; then back in; nothing lost."""
    r = faults.osd_kill_run(ceph_cluster, seed=11, who=admin(ceph_cluster), mode="out", batches=10)
    assert r["acked_writes"] > 0 and r["lost"] == 0, r
    assert ceph_cluster.health()["osds_in"] == len(ceph_cluster.osds)


def test_contents_differ_per_round_and_block():
    a, b, c = faults.contents(1, [5]), faults.contents(2, [5]), faults.contents(1, [6])
    assert len(a) == 4096 and not (a == b).all() and not (a == c).all()
    assert (faults.contents(1, [5, 6])[4096:] == c).all()
