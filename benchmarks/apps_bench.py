"""The papers' applications beside their baselines, at one size, one table (gpuio_apps.papers.suite).

    python3 benchmarks/apps_bench.py --size tiny --device cpu                 # CI smoke: correctness only
    python3 benchmarks/apps_bench.py --size large --device cuda --cold --store /data --json apps.json

Per app: gpuio time, the baseline's (pread/pwrite + copy over the same files; torch.save/load for the
GPT-2 checkpoints), I/O alone, compute alone, ideal = max of the two, the check against an in-memory
reference; then the judged ratios with their targets. `--apps sort` (repeatable) runs a subset.
"""
import sys

from gpuio_apps.papers.suite import main

if __name__ == "__main__":
    sys.exit(main())
