"""A `gpuio bench` JSON as a Markdown table (for a run's notes; benchmarks/RESULTS.md is generated from records):
    python -m gpuio_apps.bench.markdown gpuio-bench.json"""
from __future__ import annotations

import json
import sys


def _fig(r: dict, x: float) -> str:
    return f"{x / 1e3:.1f} K IOPS" if r["unit"] == "IOPS" else f"{x:.2f} GB/s"


def table(doc: dict) -> str:
    lines = ["| workload | backend, data path, workers, ring QD | gpuio | best raw (config) | "
             "ratio: per-round median [min-max] | ratio of medians | CPU us/op gpuio / raw (ratio) | workers busy |",
             "|---|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        c = r["cpu_us_per_op"]
        lines.append(
            f"| {r['workload']} | {r['backend']}, {r['data_path']}, {r['workers']}, {r['gpuio_config'].split()[-1]} "
            f"| {_fig(r, r['gpuio']['median'])} | {_fig(r, r['raw_best']['median'])} "
            f"({r['raw_best_config'].removeprefix('raw ')}) | {r['ratio']['median']:.2f} "
            f"[{r['ratio']['min']:.2f}-{r['ratio']['max']:.2f}] | {r['ratio_of_medians']:.2f} "
            f"| {c['gpuio']:.2f} / {c['raw']:.2f} ({c['ratio']:.2f}) | {r['workers_busy']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(table(json.load(f)))
