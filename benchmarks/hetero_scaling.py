"""N GPUs against one, from the hetero job's JSON reports (examples/rgat_igbh.py --json), several runs each.

    python3 benchmarks/hetero_scaling.py run1-np1.json run1-np2.json run2-np1.json run2-np2.json ...

One line per run (ranks, seeds/s over all ranks, rank 0's first step and its ms per step after it, regime),
then per rank count above one the judged line: median seeds/s of the N-rank runs / median of the one-rank runs, with the
spread of the runs. Why several runs: on 2 x H200 the same code and data gave 1.63 x in one call and 1.88 x in
the next (a 100-step run lasts ~5 s; the one-GPU run alone varied 18 594 - 19 999 seeds/s), so one pair of runs
cannot tell a 1.8 x bar apart (docs/archive/results/RESULTS_2026-11-25-night.md). Runs alternate 1, 2, 1, 2 in
`scripts/gpu.sh hetero` (GPUIO_HETERO_NPROC="1 2 1 2 1 2") so that a drift of the machine falls on both.
"""
from __future__ import annotations

import json
import statistics
import sys

from gpuio_apps.gnn.hetero_report import all_ranks, regime

GOAL = 1.8  # the bar: steps/s of 2 GPUs >= 1.8 x one GPU when the data fits the caches


def run_figures(path: str) -> dict | None:
    """(ranks, seeds/s, steady ms/step, regime words) of the gpuio result of one report, None without one."""
    with open(path) as f:
        doc = json.load(f)
    r = next((x for x in doc.get("results", []) if x.get("backend") == "gpuio" and x.get("ranks")), None)
    if r is None:
        return None
    wall, _ = all_ranks(r["ranks"])
    seeds = sum(q["steps"] for q in r["ranks"]) * r["batch_size"]
    ends = r.get("step_end_s") or []
    steady = 1000 * (ends[-1] - ends[0]) / (len(ends) - 1) if len(ends) > 1 else float("nan")
    return dict(path=path, ranks=len(r["ranks"]), seeds_s=seeds / wall, steady_ms=steady,
                first_s=ends[0] if ends else float("nan"), regime=regime(r, r["ranks"])[1])


def judged(runs: list) -> list:
    """The judged lines: for each rank count n > 1, median seeds/s of n ranks / median of one rank."""
    by = {}
    for r in runs:
        by.setdefault(r["ranks"], []).append(r)
    one = by.get(1)
    out = []
    for n in sorted(k for k in by if k > 1):
        if not one:
            out.append(f"judged: {n} GPUs / 1 GPU: no one-GPU run to compare with")
            continue
        a, b = [r["seeds_s"] for r in one], [r["seeds_s"] for r in by[n]]
        ratio = statistics.median(b) / statistics.median(a)
        regimes = sorted({r["regime"] for r in one + by[n]})
        out.append(f"judged: {n} GPUs / 1 GPU seeds/s = {ratio:.2f} (goal >= {GOAL}: "
                   f"{'MET' if ratio >= GOAL else 'NOT MET'}) [medians of {len(b)} and {len(a)} runs: "
                   f"{statistics.median(b):,.0f} vs {statistics.median(a):,.0f} seeds/s; runs span "
                   f"{min(b) / max(a):.2f}-{max(b) / min(a):.2f} x; regime: {'; '.join(regimes)}]")
    return out


def main(argv: list) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: hetero_scaling.py REPORT.json ...", file=sys.stderr)
        return 2
    runs = [r for r in map(run_figures, argv) if r is not None]
    for r in runs:
        print(f"{r['path']}: {r['ranks']} rank(s) {r['seeds_s']:,.0f} seeds/s, first step {r['first_s']:.2f} s, "
              f"then {r['steady_ms']:.1f} ms/step; {r['regime']}")
    for line in judged(runs):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
