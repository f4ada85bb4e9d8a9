"""The engine at CAM's scale: N emulated devices, 4 KiB random reads into host / GPU memory.

Grid: device kinds (null device, sim free-running or paced, paced null devices, /dev/shm files via uring or posix) x destinations (host, gpu)
x N devices x W workers; per run IOPS, GB/s, CPU cores busy, GPU SMs, scaling efficiency and the per-stage time
the engine counts, with the bound named from those counters; then the engine's own worker count (controller)
next to the best hand-picked one; then one-block latency vs pread O_DIRECT. The logic lives in
gpuio_apps.bench.ceiling (also `gpuio bench ceiling`).

  python benchmarks/engine_ceiling.py                       # full grid (~4-5 min on a 16-core box)
  python benchmarks/engine_ceiling.py --tiny --json r.json  # CI smoke (seconds; numbers meaningless)
  python benchmarks/engine_ceiling.py --kinds null,sim --dests gpu --devices 12 --workers 4,5,6 --sections grid
"""
from __future__ import annotations

import argparse
import sys


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", default="null,sim,paced,paced-null,shm-uring",
                    help="null,sim,paced,paced-null,shm-uring,shm-posix (paced-null: devices with a latency and a rate of "
                         "their own that cost the host no model or data work; the scaling efficiency is judged on them)")
    ap.add_argument("--dests", default="host,gpu", help="host,gpu (gpu skipped, saying why, without CUDA)")
    ap.add_argument("--devices", default="1,4,8,12,16")
    ap.add_argument("--workers", default="1,2,3,4,6,8")
    ap.add_argument("--seconds", type=float, default=0.4, help="measured seconds per configuration")
    ap.add_argument("--judge-seconds", type=float, default=None,
                    help="controller section: seconds of each judged measurement (the settled controller, the "
                         "hand-picked counts re-measured; default gpuio_apps.bench.ceiling_controller.JUDGE_S)")
    ap.add_argument("--batch", type=int, default=16384, help="blocks per batch")
    ap.add_argument("--inflight", type=int, default=2, help="batches kept outstanding per configuration")
    ap.add_argument("--queue-depth", type=int, default=512, help="entries per worker ring")
    ap.add_argument("--shm-mib", type=int, default=64, help="size of each /dev/shm device file")
    ap.add_argument("--copy", default="batch", help="staging->GPU copy method (batch|percopy: copy engine; kernel)")
    ap.add_argument("--staging", default="ordered",
                    help="GPU destination: ordered (batch-ordered area, one copy per 256 KiB chunk), slots (one copy "
                         "per 4 KiB block, the path before it), or both: ordered,slots")
    ap.add_argument("--latency-file", default=None, help="file for the latency section (default: a temp file)")
    ap.add_argument("--latency-reads", type=int, default=300, help="one-block reads per round and method")
    ap.add_argument("--latency-rounds", type=int, default=3)
    ap.add_argument("--sections", default="cost,grid,controller,latency")
    ap.add_argument("--tiny", action="store_true", help="CI smoke size (seconds; numbers meaningless)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.tiny:
        a.kinds, a.devices, a.workers, a.seconds, a.batch = "null,sim,paced,paced-null,shm-uring", "1,2", "1,2", 0.03, 512
        a.queue_depth, a.shm_mib, a.latency_reads, a.latency_rounds = 64, 2, 20, 1
        a.judge_seconds = 0.03
    return a


def main(argv=None) -> dict:
    from gpuio_apps.bench import ceiling

    a = parse(argv)
    judge = {} if a.judge_seconds is None else dict(judge_s=a.judge_seconds)
    res = ceiling.run(kinds=tuple(k for k in a.kinds.split(",") if k), dests=tuple(d for d in a.dests.split(",") if d),
                      devices=a.devices, workers=a.workers, seconds=a.seconds, batch=a.batch,
                      queue_depth=a.queue_depth, shm_mib=a.shm_mib, latency_file=a.latency_file,
                      latency_reads=a.latency_reads, latency_rounds=a.latency_rounds,
                      sections=tuple(a.sections.split(",")), copy=a.copy, log=lambda m: print(m, flush=True),
                      json_path=a.json, staging=a.staging, inflight=a.inflight, **judge)
    if a.json:
        ceiling.write_json(res, a.json)
        print(f"JSON: {a.json}")
    return res


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except ValueError as e:  # a bad option value (run() names it): one line, exit 2
        print(f"engine_ceiling.py: {e}", file=sys.stderr)
        sys.exit(2)
