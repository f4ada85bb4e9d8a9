"""The ZnG platform study on top of gpuio.sim (an application of it; sim does not import this module): run
every platform on every workload, check the paper's orderings, write table, JSON and plots."""
from __future__ import annotations

import json
import math
import os
from typing import Sequence

from gpuio import outputs, sim

REPORT_FILES = ("zng_report.md", "zng_report.json")
PLOT_FILES = ("zng_bandwidth.png", "zng_write_redundancy.png")


def _geomean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


def zng_report(out_dir: str | os.PathLike = ".", scale: float = 1.0, workloads: Sequence[str] | None = None,
               seed: int = 1, traces: dict | None = None, plots: bool = True, overwrite: bool = False) -> dict:
    """Run every platform on every workload; write REPORT_FILES and (plots=True) PLOT_FILES into out_dir, each
    whole or not at all; existing ones are replaced only with overwrite=True. traces: optional {name:
    ZngTrace} used instead of generated ones. Returns the report dict."""
    out = os.fspath(out_dir)
    os.makedirs(out, exist_ok=True)
    if traces is None:
        names = list(workloads) if workloads else sim.zng_workloads()
        traces = {w: sim.zng_generate(w, scale, seed) for w in names}
    platforms = sim.zng_platforms()
    results = {w: {p: sim.zng_run(t, p) for p in platforms} for w, t in traces.items()}
    # Write redundancy of the register write buffer: per plane vs grouped across a die's planes (NiF).
    nif = {w: {"per-plane": sim.zng_run(t, "zng-wropt", grouped_registers=False)["write_redundancy"],
               "grouped": results[w]["zng-wropt"]["write_redundancy"],
               "none": results[w]["zng-base"]["write_redundancy"]} for w, t in traces.items()}
    checks = []
    for w, r in results.items():
        bw = [r[p]["bandwidth_gb_s"] for p in sim.ORDERED_PLATFORMS]
        checks.append({"workload": w, "check": "bandwidth zng >= zng-wropt >= zng-rdopt",
                       "values": bw, "holds": bw[0] >= bw[1] >= bw[2]})
        checks.append({"workload": w, "check": "registers cut write redundancy (grouped <= per-plane < none)",
                       "values": [nif[w]["grouped"], nif[w]["per-plane"], nif[w]["none"]],
                       "holds": nif[w]["grouped"] <= nif[w]["per-plane"] < nif[w]["none"]})
    for w in results:
        if w in sim.REGULAR_WORKLOADS:
            acc = [results[w][p]["predictor_accuracy"] for p in ("zng-rdopt", "zng")]
            checks.append({"workload": w, "check": "prefetch accuracy >= 0.85 on a regular pattern (rdopt, zng)",
                           "values": acc, "holds": min(acc) >= 0.85})
    geo = {p: _geomean(results[w][p]["bandwidth_gb_s"] for w in results) for p in platforms}
    report = {"scale": scale, "seed": seed, "accesses": {w: len(t) for w, t in traces.items()},
              "results": results, "write_redundancy": nif, "geomean_bandwidth_gb_s": geo, "checks": checks}
    outputs.write_text(os.path.join(out, "zng_report.json"), json.dumps(report, indent=1, sort_keys=True),
                      overwrite=overwrite)
    outputs.write_text(os.path.join(out, "zng_report.md"), _table(report, platforms), overwrite=overwrite)
    if plots:
        _plots(report, platforms, out, overwrite)
    return report


def _table(rep, platforms) -> str:
    res = rep["results"]
    lines = [f"# ZnG platforms on generated GPU traces (scale {rep['scale']}, seed {rep['seed']})", "",
             "Bandwidth delivered to the GPU (GB/s; simulated):", "",
             "| workload | accesses | " + " | ".join(platforms) + " |",
             "|---|---:|" + "---:|" * len(platforms)]
    for w, r in res.items():
        lines.append(f"| {w} | {rep['accesses'][w]} | " + " | ".join(f"{r[p]['bandwidth_gb_s']:.3f}" for p in platforms) + " |")
    lines.append("| geomean | | " + " | ".join(f"{rep['geomean_bandwidth_gb_s'][p]:.3f}" for p in platforms) + " |")
    lines += ["", "Read prefetch (zng) and write buffering:", "",
              "Prefetch accuracy = prefetched lines used / prefetched lines (lines still unused at the end count as "
              "wasted); decision accuracy = L2 misses whose regular/irregular class the PC's counter predicted.", "",
              "| workload | prefetch accuracy (rdopt / zng) | decision accuracy (rdopt / zng) | prefetches (zng) | "
              "final prefetch B | write redundancy none / per-plane / grouped | thrash events | pinned lines peak | "
              "GC runs (zng) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for w, r in res.items():
        z = r["zng"]
        d = r["zng-rdopt"]
        n = rep["write_redundancy"][w]
        lines.append(f"| {w} | {d['predictor_accuracy']:.3f} / {z['predictor_accuracy']:.3f} | "
                     f"{d['predictor_decision_accuracy']:.3f} / {z['predictor_decision_accuracy']:.3f} | {z['prefetches']} | "
                     f"{z['prefetch_bytes_final']} | {n['none']:.2f} / {n['per-plane']:.2f} / {n['grouped']:.2f} | "
                     f"{z['thrash_events']} | {z['pinned_lines_peak']} | {z['gc_runs']} |")
    lines += ["", "Orderings checked:", ""]
    for c in rep["checks"]:
        vals = ", ".join(f"{v:.3f}" for v in c["values"])
        lines.append(f"- {c['workload']}: {c['check']}: {vals} -> {'holds' if c['holds'] else 'DOES NOT HOLD'}")
    return "\n".join(lines) + "\n"


def _save(fig, path: str, overwrite: bool) -> None:
    with outputs.atomic_output(path, overwrite=overwrite) as tmp:
        fig.savefig(tmp, dpi=120)


def _plots(rep, platforms, out, overwrite: bool):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    res = rep["results"]
    ws = list(res)
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(platforms)
    for i, p in enumerate(platforms):
        ax.bar([x + i * width for x in range(len(ws))], [res[w][p]["bandwidth_gb_s"] for w in ws], width, label=p)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(ws))], ws)
    ax.set_yscale("log")
    ax.set_ylabel("GB/s delivered to the GPU (simulated)")
    ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    _save(fig, os.path.join(out, "zng_bandwidth.png"), overwrite)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    kinds = ["none", "per-plane", "grouped"]
    for i, k in enumerate(kinds):
        ax.bar([x + i * 0.27 for x in range(len(ws))], [rep["write_redundancy"][w][k] for w in ws], 0.27, label=k)
    ax.set_xticks([x + 0.27 for x in range(len(ws))], ws)
    ax.set_ylabel("programmed bytes / written-back bytes")
    ax.legend(title="flash registers")
    fig.tight_layout()
    _save(fig, os.path.join(out, "zng_write_redundancy.png"), overwrite)
    plt.close(fig)
