"""One table of the applications' judged points from the JSON files a GPU call left (`scripts/gpu.sh
apps|graph`), each with its value, its bar and whether the bar is met, then the time breakdowns (resize, GPT-2) and the steps' times.

    python3 benchmarks/apps_summary.py OUT_DIR          # reads OUT_DIR/apps-*.json, graph-*.json, steps.tsv

A point whose run did not finish (cut by its bound, failed, skipped) shows as "not measured" with the step's
exit status, so a missing figure is never read as a met one. Sizes below the judged ones are labelled.
"""
from __future__ import annotations

import glob
import json
import os
import sys

JUDGED_SCALE = 26          # BFS: >= 2^26 vertices
JUDGED_SORT_KEYS = 4 << 30  # sort: >= 4 Gi int32 keys
JUDGED_VECADD_N = 10 ** 9   # vector add: two 1e9-element float64 vectors


def _load(path: str):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": f"{os.path.basename(path)}: {e}"}


def app_rows(out: str) -> dict:
    """{app name: row} from every apps-*.json (gpuio_apps.papers.suite's {"meta", "rows"})."""
    rows = {}
    for p in sorted(glob.glob(os.path.join(out, "apps-*.json"))):
        for r in _load(p).get("rows", []):
            rows[r["app"]] = r
    return rows


def graph_runs(out: str) -> list[dict]:
    return [d for d in (_load(p) for p in sorted(glob.glob(os.path.join(out, "graph-*.json")))) if "rows" in d]


def steps(out: str) -> list[list[str]]:
    p = os.path.join(out, "steps.tsv")
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def _ok(check: str) -> bool:
    return isinstance(check, str) and check.startswith("ok")


def _line(point: str, value, bar: str, met, note: str = "", small: bool = False) -> list[str]:
    """small: the run was below the judged size, so the bar is shown but not judged."""
    if value is None:
        return [point, "not measured", bar, "-", note]
    v = f"{value:.2f}" if isinstance(value, float) else str(value)
    m = {True: "MET", False: "not met", None: "-"}[met]
    return [point, v, bar, f"({m}: small)" if small and met is not None else m, note]


def judged(rows: dict, graphs: list[dict]) -> list[list[str]]:
    """[point, value, bar, met, note] for every judged point of the applications."""
    out = []
    g = next((r for a, r in rows.items() if a.startswith("gpt2")), None)
    if g and "gpuio_s" in g:
        note = (f"{g['app']}, {g.get('checkpoint_bytes', 0) / 1e9:.2f} GB, {g.get('regime', '')[:4]}; "
                f"check {_ok(g['check'])}")
        # judged against the raw device on the same bytes, sustained, in the same call where gpt2.py measured it
        # (a new file's raw first write; the checkpoint's blocks read raw): the 1 s grid samples (in the note)
        # caught bursts the disk does not sustain (docs/archive/results/RESULTS_2026-11-26-apps.md)
        for what, same, same_name in (("save", "save_of_raw_first_write", "new file vs raw first write"),
                                      ("load", "load_of_raw_file", "same blocks read raw")):
            grid = g.get(f"{what}_of_raw")
            v = g.get(same, grid)
            rate = g.get("raw_write_Bps" if what == "save" else "raw_read_Bps")
            parts = [note]
            if same in g:
                ref = g["raw_first_write_Bps" if what == "save" else "raw_file_read_Bps"]
                parts.append(f"{same_name} ({ref / 1e9:.2f} GB/s)")
                if grid is not None:
                    parts.append(f"grid {grid:.2f} x {rate / 1e9:.2f} GB/s (1 s samples)")
            elif rate:
                parts.append(f"raw {rate / 1e9:.2f} GB/s")
            if what == "save" and "resave_of_raw_file" in g:
                parts.append(f"re-save {g['resave_of_raw_file']:.2f} x the same blocks rewritten raw "
                             f"({g['raw_file_write_Bps'] / 1e9:.2f} GB/s)")
            if what == "load" and "load_again_of_raw_file" in g:
                parts.append(f"load again {g['load_again_of_raw_file']:.2f}")
            out.append(_line(f"checkpoint {what} / raw device {'write' if what == 'save' else 'read'}", v, ">= 0.9",
                             None if v is None else v >= 0.9, "; ".join(parts)))
        for what in ("save", "load"):
            v = g.get(f"{what}_vs_torch")
            extra = f"; torch.save up to its return {g['save_vs_torch_unsynced']:.2f}x" if (
                what == "save" and "save_vs_torch_unsynced" in g) else ""
            if what == "save" and "resave_vs_torch" in g:
                extra += f"; both over their own files {g['resave_vs_torch']:.2f}x"
            out.append(_line(f"checkpoint {what}: torch / gpuio", v, ">= 3", None if v is None else v >= 3,
                             f"{what} gpuio {g.get(f'{what}_gpuio_s', float('nan')):.2f} s, torch "
                             f"{g.get(f'{what}_torch_s', float('nan')):.2f} s{extra}"))
        st = "safetensors reads gpuio's file" in g["check"] or "safetensors.torch.load reads" in g["check"]
        out.append(_line("safetensors loads gpuio's checkpoint", "yes" if st else "no", "yes", st, g["check"][:60]))
    else:
        out.append(_line("checkpoints (GPT-2)", None, "-", None, (g or {}).get("check", "no row")[:70]))
    s = rows.get("sort")
    if s and "gpuio_s" in s:
        small = s.get("n", 0) < JUDGED_SORT_KEYS
        note = (f"{s.get('n', 0) / 2**30:.2f} Gi keys{' (BELOW the judged 4 Gi)' if small else ''}, budget "
                f"{s.get('budget', 0) / 2**30:.2f} GiB, {s.get('runs')} runs; check {_ok(s['check'])}")
        out.append(_line("sort: pread/pwrite / gpuio", s["speedup"], ">= 1.5", s["speedup"] >= 1.5, note, small))
        v = s["gpuio_s"] / s["io_s"]
        out.append(_line("sort: gpuio / I/O-bound ideal", v, "<= 1.3", v <= 1.3, small=small, note=
                         f"gpuio {s['gpuio_s']:.1f} s, I/O only {s['io_s']:.1f} s, compute {s['compute_s']:.1f} s"
                         + (f", thread-pool baseline {s['threads_s']:.1f} s" if "threads_s" in s else "")))
    else:
        out.append(_line("sort", None, "-", None, (s or {}).get("check", "no row")[:70]))
    v = rows.get("vecadd")
    if v and "gpuio_s" in v:
        small = v.get("n", 0) < JUDGED_VECADD_N
        note = f"n {v.get('n')}, gpuio {v['gpuio_s']:.2f} s, baseline {v['baseline_s']:.2f} s; check {_ok(v['check'])}"
        out.append(_line("vecadd: time / max(I/O, compute)", v["of_ideal"], "<= 1.1", v["of_ideal"] <= 1.1, note,
                         small))
        r = v.get("of_raw")
        out.append(_line("vecadd: rate / raw read+write", r, ">= 0.9", None if r is None else r >= 0.9,
                         f"raw read {v.get('raw_read_Bps', 0) / 1e9:.2f}, "
                         f"write {v.get('raw_write_Bps', 0) / 1e9:.2f} GB/s",
                         small))
    else:
        out.append(_line("vecadd", None, "-", None, (v or {}).get("check", "no row")[:70]))
    for name in ("gemm-bf16", "gemm-fp32"):
        r = rows.get(name)
        if r and "gpuio_s" in r:
            kv = (f"kvikio {r['kvikio_s']:.2f} s ({r['speedup_kvikio']:.2f}x)" if "kvikio_s" in r else
                  "kvikio skipped" if "kvikio_skipped" in r else "kvikio not run")
            out.append(_line(f"{name}: time / max(I/O, compute)", r["of_ideal"], "<= 1.1", r["of_ideal"] <= 1.1,
                             f"gpuio {r['gpuio_s']:.2f} s, {r.get('baseline', 'baseline')} {r['baseline_s']:.2f} s "
                             f"({r['speedup']:.2f}x), {kv}; check {_ok(r['check'])}"))
    seen = set()
    for d in graphs:
        scale = (d.get("graph") or {}).get("scale")
        times = {}
        for r in d["rows"]:
            times.setdefault(r["algo"], {})[r["source"]] = r
        for algo, by in times.items():
            seen.add(algo)
            arr, pr = by.get("gpuio-array"), by.get("pread+copy")
            label = f"2^{scale}" + ("" if (scale or 0) >= JUDGED_SCALE else " (BELOW the judged 2^26)")
            checks = "; ".join(f"{k}: {r['check']}" for k, r in by.items())[:90]
            hit = f", hit rate {arr['hit_rate']:.3f}" if arr and "hit_rate" in arr else ""
            if arr and pr:
                ratio = pr["seconds"] / arr["seconds"]
                judged_bfs = algo == "bfs"
                out.append(_line(f"{algo}: pread+copy / gpuio-array", ratio, ">= 2" if judged_bfs else "(reported)",
                                 ratio >= 2 if judged_bfs else None,
                                 f"{label}, gpuio-array {arr['seconds']:.2f} s{hit}, {arr['rounds']} rounds; {checks}",
                                 (scale or 0) < JUDGED_SCALE))
            elif arr:
                out.append(_line(f"{algo}: gpuio-array seconds", arr["seconds"], "(reported)", None,
                                 f"{label}{hit}; {checks}"))
            mm = by.get("memmap+copy")
            if arr and mm:
                out.append(_line(f"{algo}: memmap+copy / gpuio-array", mm["seconds"] / arr["seconds"], "(reported)",
                                 None, f"memmap+copy {mm['seconds']:.2f} s"))
    for algo in ("bfs", "cc", "sssp"):
        if algo not in seen:
            out.append(_line(algo, None, ">= 2" if algo == "bfs" else "(reported)", None, "no graph JSON"))
    return out


def breakdowns(rows: dict) -> list[str]:
    """GNStor-style time breakdowns: resize (I/O vs compute beside the baseline), GPT-2 (load, train, checkpoint)."""
    out = []
    r = rows.get("resize")
    if r and "gpuio_s" in r:
        out.append(f"resize {r.get('shape', '')} x {r.get('images')} images: gpuio {r['gpuio_s']:.3f} s "
                   f"(I/O only {r['io_s']:.3f} s, compute only {r['compute_s']:.3f} s, ideal {r['ideal_s']:.3f}, "
                   f"gpuio/ideal {r['of_ideal']:.2f}); {r['baseline']} {r['baseline_s']:.3f} s "
                   f"(speedup {r['speedup']:.2f}x); check {r['check'][:50]}")
    g = next((r for a, r in rows.items() if a.startswith("gpt2")), None)
    if g and "gpuio_s" in g:
        paths = [k[len("save_"):-2] for k in g if k.startswith("save_") and k.endswith("_s")
                 and not k.endswith("_unsynced_s")]
        out.append(f"{g['app']} ({g.get('checkpoint_bytes', 0) / 1e9:.2f} GB checkpoint with Adam state): "
                   + "; ".join(f"{p}: save {g[f'save_{p}_s']:.2f} s, load {g[f'load_{p}_s']:.2f} s" for p in paths)
                   + f"; train {g['compute_s']:.2f} s for {g.get('train_steps')} steps; job (save + load + train) "
                   f"gpuio {g['gpuio_s']:.2f} s vs {g['baseline']} {g['baseline_s']:.2f} s")
    return out


def table(lines: list[list[str]], head=("judged point", "value", "bar", "met", "note")) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)] if lines else [len(h) for h in head]
    fmt = lambda cells: " | ".join(str(c).ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([fmt(head), "-+-".join("-" * w for w in widths)] + [fmt(line) for line in lines])


def summary(out: str) -> str:
    rows = app_rows(out)
    parts = [table(judged(rows, graph_runs(out)))]
    parts += breakdowns(rows)
    st = steps(out)
    if st:
        parts.append("steps: " + ", ".join(f"{s[0]} {s[2]} s" + ("" if s[1] == "0" else f" (rc {s[1]})")
                                           for s in st if len(s) >= 3))
    failed = [f"{a}: {r['check'][:100]}" for a, r in rows.items() if not _ok(r.get("check", ""))]
    if failed:
        parts.append("checks not ok: " + "; ".join(failed))
    return "\n".join(parts)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print(__doc__, file=sys.stderr)
        return 2
    print(summary(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
