"""Summaries of interleaved samples: per workload and engine backend, the engine's median figure beside
the best raw configuration's (best = highest median), their ratio with its spread over rounds, CPU time
per request, and worker occupancy. Also the JSON document and the ratio plot."""
from __future__ import annotations

import json
import os
import statistics

from gpuio import outputs
from .workloads import Workload


def _rate(s: dict) -> float:
    return s["bytes"] / s["seconds"] if s["seconds"] > 0 else 0.0


def _cpu_us(s: dict) -> float:
    return s["cpu_seconds"] / s["requests"] * 1e6 if s["requests"] else float("nan")


def _stats(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def summarize(workloads: list[Workload], samples: dict, backends) -> list[dict]:
    rows = []
    for w in workloads:
        by_cfg = samples[w.name]
        raw = {k: v for k, v in by_cfg.items() if k.startswith("raw ")}
        raw_median = {k: statistics.median(_rate(s) for s in v) for k, v in raw.items()}
        best = max(raw_median, key=raw_median.get)
        best_by_round = {s["round"]: s for s in raw[best]}
        for b in backends:
            mine = {k: v for k, v in by_cfg.items() if k.startswith(f"gpuio {b} ")}
            eng_median = {k: statistics.median(_rate(s) for s in v) for k, v in mine.items()}
            eng_best = max(eng_median, key=eng_median.get)
            eng = mine[eng_best]
            ratios = [_rate(s) / _rate(best_by_round[s["round"]]) for s in eng if _rate(best_by_round[s["round"]]) > 0]
            cpu_eng = statistics.median(_cpu_us(s) for s in eng)
            cpu_raw = statistics.median(_cpu_us(s) for s in raw[best])
            last = eng[-1]
            rows.append({
                "workload": w.name, "op": w.op, "request_bytes": w.request_bytes, "sequential": w.sequential,
                "unit": w.unit, "backend": b, "data_path": last["data_path"], "backend_detail": last["backend_detail"],
                "workers": last["workers"], "batch_requests": w.batch_requests,
                "gpuio_config": eng_best, "gpuio_all": {k: w.figure(v) for k, v in eng_median.items()},
                "batches_inflight": w.batches_inflight,
                "gpuio": _stats([w.figure(_rate(s)) for s in eng]),
                "raw_best_config": best,
                "raw_best": _stats([w.figure(_rate(s)) for s in raw[best]]),
                "raw_all": {k: w.figure(v) for k, v in raw_median.items()},
                "ratio": _stats(ratios),
                "ratio_of_medians": statistics.median(w.figure(_rate(s)) for s in eng) / w.figure(raw_median[best]),
                "cpu_us_per_op": {"gpuio": cpu_eng, "raw": cpu_raw, "ratio": cpu_eng / cpu_raw if cpu_raw else None,
                                  "gpuio_workers_only": statistics.median(
                                      s["worker_cpu_seconds"] / s["requests"] * 1e6 for s in eng if s["requests"])},
                "workers_busy": statistics.median(s["busy_worker_seconds"] / s["seconds"] for s in eng),
                "workers_cpu_cores": statistics.median(s["worker_cpu_seconds"] / s["seconds"] for s in eng),
            })
    return rows


WRITTEN_BY = "gpuio bench"  # the JSON's first key (bench, bench apps, bench ceiling): is_ours knows the file by it
_OURS_BYTES_MAX = 1 << 30  # a file larger than any result document is not one


def document(meta: dict, rows: list[dict], samples: dict) -> dict:
    return {"meta": meta, "results": rows, "samples": samples}


def is_ours(path: str) -> bool:
    """True when path holds a result document of `gpuio bench`, `bench apps` or `bench ceiling` (its "written_by"
    key), which a later run may replace; anything else (other JSON, not JSON, unreadable) is not."""
    try:
        if os.path.getsize(path) > _OURS_BYTES_MAX:
            return False
        with open(path, "rb") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("written_by") == WRITTEN_BY


def write_json(path: str, doc: dict, overwrite: bool = False, default=float) -> None:
    """doc as JSON at path, marked as gpuio bench's (WRITTEN_BY its first key), written whole or not at all; an
    existing file is replaced only when it is an earlier result of gpuio bench, apps or ceiling (is_ours) or with
    overwrite. `default` turns what JSON cannot hold into what it can, as json.dumps's."""
    outputs.write_text(path, json.dumps({"written_by": WRITTEN_BY, **doc}, indent=1, default=default) + "\n",
                       overwrite=overwrite, ours=is_ours)


def fmt_figure(unit: str, x: float) -> str:
    return f"{x / 1e3:,.1f} K" if unit == "IOPS" else f"{x:.2f} GB/s"


def plot(path: str, rows: list[dict], title: str, overwrite: bool = False) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["workload"] for r in rows))
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    width = 0.8 / len(backends)
    fig, ax = plt.subplots(figsize=(1.6 * len(names) + 2, 4))
    for j, b in enumerate(backends):
        rs = [next(r for r in rows if r["workload"] == n and r["backend"] == b) for n in names]
        med = [r["ratio"]["median"] for r in rs]
        err = [[m - r["ratio"]["min"] for m, r in zip(med, rs)], [r["ratio"]["max"] - m for m, r in zip(med, rs)]]
        ax.bar([i + j * width for i in range(len(names))], med, width, yerr=err, capsize=3, label=f"gpuio {b}")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.axhline(0.9, color="r", lw=0.6, ls="--", label="0.90")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))], names, rotation=20, ha="right")
    ax.set_ylabel("gpuio / best raw (throughput)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with outputs.atomic_output(path, overwrite=overwrite) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)
