#!/usr/bin/env python3
"""Fault campaign for gpuio volumes: N seeded runs, each killing one OSD (SIGKILL) during a gpuio
write/read stream at replicas 2 and restarting it, then checking that every acknowledged write reads back
after recovery (osd_faults.osd_kill_run). Prints one JSON line per run and a summary; exits 1
if any acknowledged write was lost.

    python tests/python/volumes/volumes_fault_campaign.py --runs 50              # starts (and stops) its own cluster
    python tests/python/volumes/volumes_fault_campaign.py --runs 3 --conf C      # on a running gpuio cluster

Not a test module (pytest collects test_*.py only): test_volumes_faults.py runs one seeded run of it in CI.
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1, help="first seed; run i uses seed + i")
    ap.add_argument("--mode", choices=["kill", "out"], default="kill")
    ap.add_argument("--batches", type=int, default=12, help="write/read rounds per run")
    ap.add_argument("--conf", default="", help="ceph.conf of a running gpuio cluster (default: start one)")
    ap.add_argument("--osds", type=int, default=3)
    a = ap.parse_args()
    if a.runs < 1:
        ap.error(f"--runs must be >= 1, got {a.runs}")
    from gpuio.volumes import Identity
    import osd_faults as faults
    from gpuio_apps import cluster

    t0 = time.monotonic()
    results = []
    with cluster.running(a.conf, "gpuio-campaign-", osds=a.osds) as c:
        who = Identity(conf=c.conf)
        for i in range(a.runs):
            r = faults.osd_kill_run(c, a.seed + i, who, mode=a.mode, batches=a.batches)
            results.append(r)
            print(json.dumps(r), flush=True)
    lost = sum(r["lost"] for r in results)
    summary = {"runs": len(results), "mode": a.mode, "lost": lost,
               "acked_writes": sum(r["acked_writes"] for r in results),
               "failed_writes": sum(r["failed_writes"] for r in results),
               "max_stall_s": max(r["stall_s"] for r in results),
               "max_recovery_s": max(r["recovery_s"] for r in results),
               "seconds": round(time.monotonic() - t0, 1)}
    print("summary " + json.dumps(summary), flush=True)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
