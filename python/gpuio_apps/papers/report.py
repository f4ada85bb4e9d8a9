"""What `gpuio bench apps` prints for its rows: the table, the judged ratios against their bars, the JSON. Its own
module so that an app's `main` (e.g. `python -m gpuio_apps.papers.sort --json`) can report without importing the runner
registry in apps.bench, which imports every app."""
from __future__ import annotations

import os
import sys
import textwrap


WIDTH = 100  # columns of the compact output (`gpuio bench apps` without --verbose)

def _f(v, fmt="{:.3f}"):
    return fmt.format(v) if isinstance(v, (int, float)) else "-"


def table(rows: list[dict]) -> str:
    head = ("app", "size", "regime", "gpuio s", "baseline", "baseline s", "speedup", "kvikio s", "vs kvikio",
            "I/O s", "compute s", "ideal s", "gpuio/ideal", "check")
    lines = [[r["app"], r["size"], r.get("regime", "-"), _f(r.get("gpuio_s")), r.get("baseline", "-"),
              _f(r.get("baseline_s")), _f(r.get("speedup"), "{:.2f}x"),
              "skipped" if "kvikio_skipped" in r else _f(r.get("kvikio_s")), _f(r.get("speedup_kvikio"), "{:.2f}x"),
              _f(r.get("io_s")), _f(r.get("compute_s")),
              _f(r.get("ideal_s")), _f(r.get("of_ideal"), "{:.2f}"), r["check"][:70]] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]
    fmt = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(line) for line in lines])


def acceptance(rows: list[dict]) -> list[str]:
    """The issue's judged ratios from these rows, each with its target (meaningful on the GPU machine)."""
    out = []
    for r in rows:
        a = r["app"]
        if "gpuio_s" not in r:
            continue
        if a.startswith("gemm") or a == "vecadd":
            out.append(f"{a}: time / max(I/O, compute) = {r['of_ideal']:.2f} (target <= 1.1)")
        if "kvikio_s" in r:
            out.append(f"{a}: KvikIO baseline {r['kvikio_s']:.3f} s / gpuio = {r['speedup_kvikio']:.2f}x "
                       f"({r['kvikio_data_path']})")
        elif "kvikio_skipped" in r:
            out.append(f"{a}: KvikIO baseline skipped: {r['kvikio_skipped']}")
        if a == "vecadd" and "of_raw" in r:
            out.append(f"vecadd: rate / raw device read+write = {r['of_raw']:.2f} (target >= 0.9)")
        if a == "sort":
            out.append(f"sort: pread/pwrite baseline / gpuio = {r['speedup']:.2f} (target >= 1.5); "
                       f"gpuio / I/O-bound ideal = {r['gpuio_s'] / r['io_s']:.2f} (target <= 1.3); "
                       f"thread-pool async baseline {r.get('threads_s', float('nan')):.3f} s; lines of merge I/O "
                       f"code gpuio {r['merge_io_lines_gpuio']} vs hand-written async "
                       f"{r['merge_io_lines_handwritten_async']}")
        if a.startswith("gpt2"):
            s = f"{a}: checkpoint save / load " + "; ".join(
                f"vs {o} {r[f'save_vs_{o}']:.2f}x / {r[f'load_vs_{o}']:.2f}x"
                + (" (target >= 3)" if o == "torch" else "")
                for o in ("torch", "safetensors", "basic") if f"save_vs_{o}" in r)
            if "save_vs_torch_unsynced" in r:
                s += f"; saves timed until fsync (torch.save up to its return: {r['save_vs_torch_unsynced']:.2f}x)"
            if "save_of_raw" in r:
                s += f"; of raw device {r['save_of_raw']:.2f} / {r['load_of_raw']:.2f} (target >= 0.9)"
            if "resave_of_raw" in r:
                s += (f"; re-save over its blocks {r['resave_of_raw']:.2f} x raw write; new file "
                      f"{r['save_of_raw_first_write']:.2f} x the raw first write")
            if "resave_vs_torch" in r:
                s += f"; re-save vs torch.save over its own file {r['resave_vs_torch']:.2f}x"
            if "load_of_raw_file" in r:
                s += (f"; load / raw read of the same blocks {r['load_of_raw_file']:.2f}, again "
                      f"{r['load_again_of_raw_file']:.2f}; re-save / the same blocks rewritten raw "
                      f"{r['resave_of_raw_file']:.2f}")
            out.append(s)
        if a == "resize":
            out.append(f"resize: I/O {r['io_s']:.3f} s, compute {r['compute_s']:.3f} s, gpuio {r['gpuio_s']:.3f} s, "
                       f"{r['baseline']} {r['baseline_s']:.3f} s")
    return out


def compact_table(rows: list[dict], width: int = WIDTH) -> str:
    """table() cut to `width` columns: the regime once above it, the check text shortened to what fits."""
    head = ("app", "gpuio s", "baseline", "baseline s", "speedup", "gpuio/ideal", "check")
    lines = [[r["app"], _f(r.get("gpuio_s")), r.get("baseline", "-"), _f(r.get("baseline_s")),
              _f(r.get("speedup"), "{:.2f}x"), _f(r.get("of_ideal"), "{:.2f}"), r["check"]] for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)][:-1]
    room = max(len(head[-1]), width - sum(w + 2 for w in widths))
    cut = lambda t: t if len(t) <= room else t[:room - 3] + "..."  # noqa: E731
    fmt = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + "  " + cut(str(cells[-1]))  # noqa: E731
    regimes = ", ".join(dict.fromkeys(r.get("regime", "-") for r in rows))
    return "\n".join([f"regime: {regimes}", fmt(head), fmt(["-" * w for w in widths] + ["-" * room])]
                     + [fmt(line) for line in lines])


def report(rows: list[dict], json_path: str | None, wide: bool = True, overwrite: bool = True) -> int:
    """Prints the table and the judged ratios (wide: every column and whole lines; else compact_table and the
    ratios wrapped to WIDTH columns), writes the JSON (whole or not at all; an existing file is replaced only
    when an earlier gpuio bench wrote it, or with overwrite: `gpuio bench apps` passes its --force), returns 1
    when an app's check failed."""
    print(table(rows) if wide else compact_table(rows))
    for line in acceptance(rows):
        print(line if wide else textwrap.fill(line, WIDTH, subsequent_indent="    "))
    if json_path:
        from ..bench import meta, report as bench_report

        bench_report.write_json(json_path, {"meta": meta.collect(os.path.dirname(os.path.abspath(json_path))),
                                            "rows": rows}, overwrite=overwrite, default=str)
        print(f"JSON: {json_path}")
    failed = [r["app"] for r in rows if r["check"].startswith("FAILED")]
    for r in rows:
        if "traceback" in r:
            print(r["traceback"], file=sys.stderr)
    return 1 if failed else 0
