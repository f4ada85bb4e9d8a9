"""Multi-device scaling of the engine over emulated SSDs (the `sim` backend, paced in real time).

The devices are EMULATED: each is the flash model of gpuio.sim (preset and channels below) with its data in
memory; completions are released when the model says the device would have finished. The claim checked:
the engine over N devices reaches >= 0.9 x N x its one-device rate with <= 4 workers.

Runs, interleaved and repeated (median and spread reported): 1 device with 1 worker, then N devices with W
workers, random 4 KiB block reads through gpuio.Engine.read. Usage:
  python benchmarks/sim_scaling.py [--devices 8] [--workers 4] [--seconds 2] [--repeats 3] [--tiny]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np


def run(devices: int, workers: int, seconds: float, batch: int, queue_depth: int, seed: int) -> dict:
    from gpuio.engine import Engine
    e = Engine([f"sim{i}" for i in range(devices)], block_size=4096, stripe_bytes=65536, backend="sim",
               workers=workers, queue_depth=queue_depth)
    try:
        rng = np.random.default_rng(seed)
        out = np.empty((batch, 4096), dtype=np.uint8)
        e.read(rng.integers(0, e.total_blocks, batch, dtype=np.int64), out)  # warm: allocate, start workers
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            e.read(rng.integers(0, e.total_blocks, batch, dtype=np.int64), out)
            n += batch
        dt = time.perf_counter() - t0
        st = e.stats()
        return dict(devices=devices, workers=workers, iops=n / dt, seconds=dt, backend=st["backend"],
                    data_path=st["data_path"], worker_cpu_seconds=st.get("worker_cpu_seconds", 0.0),
                    active_workers=st["active_workers"])
    finally:
        e.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16384, help="blocks per Engine.read call")
    ap.add_argument("--queue-depth", type=int, default=256, help="entries per worker ring")
    ap.add_argument("--sim", default="preset=tlc,channels=1,device_bytes=1073741824,paced=1",
                    help="GPUIO_SIM settings of every emulated device")
    ap.add_argument("--tiny", action="store_true", help="CI smoke size (numbers meaningless)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.tiny:
        a.devices, a.workers, a.seconds, a.repeats, a.batch = 2, 1, 0.05, 1, 256
    os.environ["GPUIO_SIM"] = a.sim  # read by the sim backend when the engine opens its devices
    one, many = [], []
    for r in range(a.repeats):  # interleaved
        one.append(run(1, 1, a.seconds, a.batch, a.queue_depth, r))
        many.append(run(a.devices, a.workers, a.seconds, a.batch, a.queue_depth, r))
    r1 = statistics.median(x["iops"] for x in one)
    rn = statistics.median(x["iops"] for x in many)
    ratio = rn / (a.devices * r1)
    print("EMULATED devices (gpuio sim backend, paced): " + one[0]["backend"])
    print(f"{'config':28s} {'IOPS median':>12s} {'min..max':>25s} {'data path':>16s}")
    for name, xs, med in ((f"1 device, 1 worker", one, r1), (f"{a.devices} devices, {a.workers} workers", many, rn)):
        lo, hi = min(x["iops"] for x in xs), max(x["iops"] for x in xs)
        print(f"{name:28s} {med:>12,.0f} {lo:>12,.0f}..{hi:<12,.0f} {xs[0]['data_path']:>16s}")
    print(f"scaling efficiency = {a.devices}-device IOPS / ({a.devices} x 1-device IOPS) = {ratio:.3f}  "
          f"(target >= 0.9 with <= 4 workers; workers used: {a.workers}; host CPUs: {os.cpu_count()})")
    print(f"IOPS per worker core ({a.devices} devices): {rn / a.workers:,.0f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(one=one, many=many, ratio=ratio, args=vars(a)), f, indent=1)


if __name__ == "__main__":
    main()
