"""Simulation speed of the SSD model: simulated requests per wall second on one core (trace replay).

Prints one table: workload, requests simulated, model seconds, requests/s, and the ratio to the 1,000,000
requests/s target. Parsing is excluded (traces are loaded once, then replayed `--repeat` times back to back
through one simulated SSD). Usage: python benchmarks/sim_speed.py [--repeat 100] [--requests 2000000] [--tiny]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from gpuio import sim

TARGET = 1_000_000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", default=os.environ.get("GPUIO_TRACES", "/work/shared/traces"))
    ap.add_argument("--repeat", type=int, default=100, help="passes over each shared trace")
    ap.add_argument("--requests", type=int, default=2_000_000, help="synthetic 4 KiB requests")
    ap.add_argument("--runs", type=int, default=3, help="repeats; the median is reported")
    ap.add_argument("--tiny", action="store_true", help="CI smoke size")
    ap.add_argument("--json", default=None, help="write the numbers here")
    a = ap.parse_args()
    if a.tiny:
        a.repeat, a.requests, a.runs = 2, 20_000, 1
    cases = []
    for p in sorted(Path(a.traces).glob("*.trace")):
        t = sim.load_trace(p)
        cases.append((f"{p.stem} (DiskSim, znand)", t, dict(preset="znand", repeat=a.repeat)))
    syn = sim.synthesize("znand", requests=a.requests, request_bytes=4096, read_ratio=0.7, seed=1)
    cases.append(("synthetic 4 KiB random 70% read QD32 (znand)", syn, dict(preset="znand", queue_depth=32)))
    syn_gc = sim.synthesize("tlc", requests=a.requests, request_bytes=4096, read_ratio=0.0, seed=2)
    cases.append(("synthetic 4 KiB random writes, full drive + GC (tlc)", syn_gc,
                  dict(preset="tlc", queue_depth=32, prefill=1.0, blocks_per_plane=96)))
    rows = []
    for name, t, kw in cases:
        rates, res = [], None
        for _ in range(a.runs):
            res = sim.replay(t, **kw)
            rates.append(res.requests_per_second)
        med = statistics.median(rates)
        rows.append(dict(workload=name, requests=res.requests, rate=med, spread=(min(rates), max(rates)),
                         ratio=med / TARGET, waf=res.stats["waf"], gc_runs=res.stats["gc_runs"]))
    print(f"{'workload':56s} {'requests':>10s} {'req/s (median)':>15s} {'min..max':>21s} {'vs 1M':>6s}")
    for r in rows:
        lo, hi = r["spread"]
        print(f"{r['workload']:56s} {r['requests']:>10d} {r['rate']:>15,.0f} {lo:>10,.0f}..{hi:<10,.0f} {r['ratio']:>6.2f}")
    print(f"(one core, {os.cpu_count()} CPUs on this machine; the simulated device is emulated, rates are model speed)")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
