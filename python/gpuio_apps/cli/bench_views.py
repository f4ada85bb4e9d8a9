"""The compact (default) view of `gpuio bench ceiling`: what fits 100 columns. `--verbose` prints the
benchmark's own log instead (every measured point, full-width tables); the JSON holds everything either way."""
from __future__ import annotations

import textwrap

WIDTH = 100


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
