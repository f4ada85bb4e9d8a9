"""What `gpuio bench` prints: its table (bench_table, fitting TABLE_WIDTH columns) and the compact (default) view of
`gpuio bench ceiling` (what fits 100 columns; `--verbose` prints the benchmark's own log instead: every measured
point, full-width tables). The JSON holds everything either way."""
from __future__ import annotations

import textwrap

WIDTH = 100
TABLE_WIDTH = 120  # gpuio bench's table: what stays one line per row in a terminal of 120 columns


def build_label(info: dict) -> str:
    """The code measured: "commit <hash>" of gpuio's checkout, else "gpuio <version>" (an installed package)."""
    return f"commit {info['commit']}" if info.get("commit") else f"gpuio {info.get('version', '?')}"


def bench_table(rows: list[dict], size: str, regime: str, info: dict):
    """The rich Table of `gpuio bench`: per workload and backend, gpuio's figure beside the best raw configuration's,
    the ratio, gpuio's CPU per request (x: against the raw reference's) and worker occupancy. What every row shares (file size, cache regime, worker count)
    is in the title, so the rows fit TABLE_WIDTH columns."""
    from rich import box
    from rich.table import Table

    from ..bench.report import fmt_figure

    def spread(r: dict) -> str:
        s = r["ratio"]
        return f"{s['median']:.2f}" + (f" [{s['min']:.2f}-{s['max']:.2f}]" if s["n"] > 1 else "")

    workers = sorted({r["workers"] for r in rows})
    t = Table(title=f"gpuio bench: {info['device']} on {info['host']}, {info['date']}, {build_label(info)}\n"
                    f"{size} file, {regime}, {'/'.join(map(str, workers))} engine workers",
              box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for c in ("workload", "gpuio path, QD", "gpuio", "best raw, config", "ratio", "CPU us/op", "busy"):
        t.add_column(c, no_wrap=True)
    for r in rows:
        g, w, cpu = r["gpuio"], r["raw_best"], r["cpu_us_per_op"]
        t.add_row(r["workload"], f"{r['data_path']} {r['gpuio_config'].split()[-1]}",
                  fmt_figure(r["unit"], g["median"]) + (" IOPS" if r["unit"] == "IOPS" else ""),
                  f"{fmt_figure(r['unit'], w['median'])} {r['raw_best_config'].removeprefix('raw ')}",
                  spread(r), f"{cpu['gpuio']:.1f} x{cpu['ratio']:.2f}", f"{r['workers_busy']:.2f}")
    return t


def _cut(text: str, room: int) -> str:
    return text if len(text) <= room else text[:room - 3] + "..."


def ceiling_lines(res: dict, kept: list[str], width: int = WIDTH) -> list[str]:
    """Per kind, destination and device count, the best worker count's row (rate, efficiency, bound), the
    latency medians and tails, and the kept JUDGED/SKIP lines wrapped to `width`."""
    cuda = f"GPU: {res.get('cuda_note')}" if res.get("cuda") else f"no GPU ({res.get('cuda_note')})"
    out = [_cut(f"gpuio bench ceiling: {res['cpus']} CPUs, {cuda}", width)]
    rows = res.get("rows") or []
    if rows:
        head = f"{'kind':<11}{'dest':<6}{'N':>3}{'W':>3}{'M IOPS':>9}{'GB/s':>8}{'eff':>6}  bound"
        out += [head, "-" * len(head)]
        for key in dict.fromkeys((r["kind"], r["dest"], r["devices"]) for r in rows):
            b = max((r for r in rows if (r["kind"], r["dest"], r["devices"]) == key), key=lambda r: r["iops"])
            line = (f"{b['kind']:<11}{b['dest']:<6}{b['devices']:>3}{b['workers']:>3}{b['iops'] / 1e6:>9.3f}"
                    f"{b['gbps']:>8.2f}{b['efficiency']:>6.2f}  ")
            out.append(line + _cut(str(b["bound"]), width - len(line)))
    lat = res.get("latency") or {}
    if lat:
        out.append("latency (us, p50 / p99, x pread):")
        out += [f"  {name:<28}{v['p50_us']:>9.1f} /{v['p99_us']:>9.1f}  ({v['p50_ratio']:.2f} / {v['p99_ratio']:.2f})"
                for name, v in lat.items()]
    for line in kept:
        out += textwrap.wrap(line, width, subsequent_indent="    ")
    out.append("(every measured point and the full tables: --verbose)")
    return out
