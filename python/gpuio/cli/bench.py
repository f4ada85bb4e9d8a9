"""`gpuio bench`: the engine against the raw device, side by side in one run (measurement logic lives in
gpuio.bench; this file parses options and displays)."""
from __future__ import annotations

import os
from typing import List, Optional

import typer

from . import _knobs


def bench(
    mode: Optional[str] = typer.Argument(None, metavar="[apps|ceiling]",
                                         help="apps: the applications (gpuio.apps) at --size tiny|small|medium|large "
                                              "(--workload picks apps, --file is their directory, --cold, --json). "
                                              "ceiling: the engine over N emulated devices, host and GPU memory "
                                              "(benchmarks/engine_ceiling.py's default grid; --quick, --json)."),
    size: str = typer.Option("1G", help="Data file size (e.g. 512M, 8G); written with real data once, reused."),
    file: str = typer.Option("gpuio-bench.dat", help="Data file (created in the current directory by default)."),
    repeats: int = typer.Option(3, min=1, help="Rounds over all configurations (median and spread reported)."),
    seconds: float = typer.Option(1.0, min=0.01, help="Seconds per measured pass."),
    workers: int = _knobs.option("bench", "workers", min=1, help="Engine worker threads (fixed)."),
    cold: bool = typer.Option(False, "--cold", help="sync + drop caches before each pass (needs root)."),
    workload: Optional[List[str]] = typer.Option(None, help="Only workloads whose name contains this (repeatable)."),
    backend: Optional[List[str]] = typer.Option(None, help="Engine backends: uring, posix (default: both)."),
    engine_qd: Optional[List[int]] = typer.Option(None, "--engine-qd",
                                                  help="Engine ring depths per worker to try (default: 32 and 128)."),
    json_path: str = typer.Option("gpuio-bench.json", "--json", help="Where the full results go."),
    plot: Optional[str] = typer.Option(None, help="Write a PNG of the ratios here (needs matplotlib)."),
    quick: bool = typer.Option(False, help="Tiny CI run: 64M file, 1 round, 0.05 s passes."),
) -> None:
    from .. import bench as gb
    from ..bench.workloads import ENGINE_BACKENDS, ENGINE_QUEUE_DEPTHS
    from . import _check

    if mode is not None:  # `gpuio bench apps`: its own runner and sizes (cli/bench_apps.py), checked there
        _check.choice("[mode]", mode, ("apps", "ceiling"))
        _check.output_file("--json", json_path)
        if mode == "ceiling":
            from ..bench import ceiling

            small = dict(kinds=("null", "sim", "paced", "paced-null"), devices="1,2", workers="1,2", seconds=0.03, batch=512,
                         queue_depth=64, shm_mib=2, latency_reads=20, latency_rounds=1, judge_s=0.03) if quick else {}
            res = ceiling.run(log=lambda m: print(m, flush=True), **small)
            path = "gpuio-ceiling.json" if json_path == "gpuio-bench.json" else json_path
            ceiling.write_json(res, path)
            print(f"JSON: {path}")
            return None
        from .bench_apps import SIZE_DEFAULT, bench_apps
        return bench_apps(SIZE_DEFAULT if size == "1G" else size, cold,
                          "gpuio-apps-bench.json" if json_path == "gpuio-bench.json" else json_path, workload,
                          None if file == "gpuio-bench.dat" else file)
    if quick:
        size, repeats, seconds = ("64M" if size == "1G" else size), 1, min(seconds, 0.05)
    nbytes = _check.size("--size", size, minimum=1 << 20)
    _check.output_file("--file", file)
    try:
        chosen = gb.workloads.select(workload)
    except ValueError as e:
        _check.fail("--workload", ",".join(workload or []), str(e))
    _check.choices("--backend", backend or ENGINE_BACKENDS, ENGINE_BACKENDS)
    for qd in engine_qd or ():
        _check.int_at_least("--engine-qd", qd, 1)
    _check.output_file("--json", json_path)
    if plot:
        _check.output_file("--plot", plot)
        _check.need("matplotlib", "--plot")

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..bench import cache, meta, report

    console = Console(width=max(Console().width, 200))  # the table is wide; never wrap it into unreadable cells
    path = os.path.abspath(file)
    o = gb.Options(path=path, size_bytes=nbytes, workloads=chosen, repeats=repeats, seconds=seconds,
                   workers=workers, cold=cold, backends=tuple(backend or ENGINE_BACKENDS),
                   engine_queue_depths=tuple(engine_qd or ENGINE_QUEUE_DEPTHS))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        t = bar.add_task(f"writing {size} of data to {file}", total=nbytes)
        wrote = gb.create_data_file(path, nbytes, progress=lambda d, _: bar.update(t, completed=d))
        bar.remove_task(t)
        t = bar.add_task("measuring", total=gb.runner.passes(o))

        out = gb.run(o, on_pass=lambda desc, done: bar.update(t, description=desc, completed=done))
    rows = gb.summarize(chosen, out["samples"], o.backends)
    regime = cache.regime(cold, out["cache_failure"])
    info = meta.collect(path)
    info.update(file=path, size_bytes=nbytes, data_written_now=wrote, cache_regime=regime,
                cache_note=out["cache_failure"], repeats=repeats, seconds_per_pass=seconds, workers=workers)
    if cold and out["cache_failure"]:
        console.print(f"[yellow]--cold: could not drop caches ({out['cache_failure']}); O_DIRECT still bypasses "
                      "the page cache[/]")
    elif not cold:
        console.print("[dim]page cache not dropped (no --cold); every pass uses O_DIRECT, which bypasses it[/]")
    console.print(_table(rows, size, regime, info))
    report.write_json(json_path, report.document(info, rows, out["samples"]))
    console.print(f"JSON: {json_path}")
    if plot:
        report.plot(plot, rows, f"gpuio / raw, {info['device']} ({info['host']}), {regime}, {size}")
        console.print(f"plot: {plot}")


def _table(rows, size, regime, info):
    from rich.table import Table

    from ..bench.report import fmt_figure

    t = Table(title=f"gpuio bench: {info['device']} on {info['host']}, {info['date']}, commit {info['commit']}")
    for c in ("workload", "file", "cache", "data path x workers QD", "gpuio", "best raw (config)", "ratio [min-max]",
              "CPU us/op gpuio / raw (ratio)", "workers busy"):
        t.add_column(c)
    for r in rows:
        g, w, ra, cpu = r["gpuio"], r["raw_best"], r["ratio"], r["cpu_us_per_op"]
        t.add_row(r["workload"], size, regime, f"{r['data_path']} x{r['workers']} {r['gpuio_config'].split()[-1]}",
                  fmt_figure(r["unit"], g["median"]) + (" IOPS" if r["unit"] == "IOPS" else ""),
                  f"{fmt_figure(r['unit'], w['median'])} ({r['raw_best_config'].removeprefix('raw ')})",
                  f"{ra['median']:.2f} [{ra['min']:.2f}-{ra['max']:.2f}]",
                  f"{cpu['gpuio']:.2f} / {cpu['raw']:.2f} ({cpu['ratio']:.2f})",
                  f"{r['workers_busy']:.2f}")
    return t
