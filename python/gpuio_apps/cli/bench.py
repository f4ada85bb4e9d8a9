"""`gpuio bench`: the engine against the raw device, side by side in one run (measurement logic lives in
gpuio_apps.bench; this file parses options and displays)."""
from __future__ import annotations

import os
from typing import List, Optional

import typer

from . import _knobs


def bench(
    mode: Optional[str] = typer.Argument(None, metavar="[apps|ceiling]",
                                         help="apps: the applications (gpuio_apps.papers) at --size "
                                              "tiny|small|medium|large "
                                              "(--workload picks apps, --file is their directory or files: an "
                                              "existing file only with --force, --cold, --json). "
                                              "ceiling: the engine over N emulated devices, host and GPU memory "
                                              "(benchmarks/engine_ceiling.py's default grid; --quick, --json)."),
    size: str = typer.Option("1G", help="Data file size (e.g. 512M, 8G); written with real data once, reused. "
                                        "The file system must have room for it (checked first)."),
    file: str = typer.Option("gpuio-bench.dat", help="Data file (created in the current directory by default). "
                                                     "An existing file is reused or rewritten only when gpuio wrote "
                                                     "it (its first 4 KiB hold gpuio's seeded data pattern, which "
                                                     "no pass writes over); any "
                                                     "other file only with --force, and never a device, fifo or "
                                                     "directory."),
    repeats: int = typer.Option(3, min=1, help="Rounds over all configurations (median and spread reported)."),
    seconds: float = typer.Option(1.0, min=0.01, help="Seconds per measured pass."),
    workers: int = _knobs.option("bench", "workers", help="Engine worker threads, a fixed count."),
    cold: bool = typer.Option(False, "--cold", help="sync + drop caches before each pass (needs root)."),
    workload: Optional[List[str]] = typer.Option(None, help="Only workloads whose name contains this (repeatable)."),
    backend: Optional[List[str]] = typer.Option(None, help="Engine backends: uring, posix (default: both)."),
    engine_qd: Optional[List[int]] = typer.Option(None, "--engine-qd",
                                                  help="Engine ring depths per worker to try (default: 32 and 128)."),
    json_path: str = typer.Option("gpuio-bench.json", "--json",
                                  help="Where the full results go (apps: gpuio-apps-bench.json, ceiling: "
                                       "gpuio-ceiling.json by default). An existing file is replaced when an "
                                       "earlier gpuio bench wrote it, any other only with --force."),
    plot: Optional[str] = typer.Option(None, help="Write a PNG of the ratios here (needs matplotlib)."),
    quick: bool = typer.Option(False, "--quick", help="Tiny CI run: 64M file, 1 round, 0.05 s passes."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --plot, and a --json or --file that "
                                                      "gpuio did not write. Without it they are refused."),
    verbose: bool = typer.Option(False, "--verbose", help="apps/ceiling: every diagnostic line and the full-width "
                                                          "tables (default: a summary that fits 100 columns)."),
) -> None:
    from .. import bench as gb
    from ..bench import datafile, report
    from ..bench.workloads import ENGINE_BACKENDS, ENGINE_QUEUE_DEPTHS, RAW_GRID
    from . import _check

    if mode is not None:  # `gpuio bench apps`: its own runner and sizes (cli/bench_apps.py), checked there
        _check.choice("[mode]", mode, ("apps", "ceiling"))
        if json_path == "gpuio-bench.json":
            json_path = f"gpuio-{'apps-bench' if mode == 'apps' else 'ceiling'}.json"
        _check.output_file("--json", json_path, force, ours=report.is_ours)
        if mode == "ceiling":
            return _ceiling(quick, json_path, verbose, force)
        from .bench_apps import SIZE_DEFAULT, bench_apps
        return bench_apps(SIZE_DEFAULT if size == "1G" else size, cold, json_path, workload,
                          None if file == "gpuio-bench.dat" else file, verbose=verbose, force=force)
    if quick:
        size, repeats, seconds = ("64M" if size == "1G" else size), 1, min(seconds, 0.05)
    nbytes = _check.size("--size", size, minimum=1 << 20)
    if nbytes % 4096:
        _check.fail("--size", size, "must be a whole number of 4 KiB blocks")
    _check.output_file("--file", file, force, ours=datafile.is_ours)
    _check.data_space("--size", size, file, nbytes, ours=datafile.is_ours)
    _knobs.check("--workers", "workers", workers, command="bench")
    try:
        chosen = gb.workloads.select(workload)
    except ValueError as e:
        _check.fail("--workload", ",".join(workload or []), str(e))
    # every workload needs a batch of requests for the engine, one request per thread for the raw grid
    # past the marker the passes leave alone (datafile.MARKER_BYTES, rounded up to whole requests)
    threads = max(c.threads for c in RAW_GRID)
    need = {w.name: (max(threads, w.batch_requests) + -(-datafile.MARKER_BYTES // w.request_bytes)) * w.request_bytes
            for w in chosen}
    w = max(chosen, key=lambda w: need[w.name])
    if nbytes < need[w.name]:
        _check.fail("--size", size, f"{w.name} needs at least {need[w.name]} bytes ({max(threads, w.batch_requests)} "
                                    f"requests: an engine batch, and one per thread of the raw reference, past the "
                                    f"file's first {datafile.MARKER_BYTES} bytes, gpuio's marker)")
    _check.choices("--backend", backend or ENGINE_BACKENDS, ENGINE_BACKENDS)
    for qd in engine_qd or ():
        _knobs.check("--engine-qd", "queue_depth", qd)
    _check.output_file("--json", json_path, force, ours=report.is_ours)
    if plot:
        _check.output_file("--plot", plot, force)
        _check.need("matplotlib", "--plot")

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..bench import meta, os_cache
    from . import bench_views

    console = Console(width=max(Console().width, bench_views.TABLE_WIDTH))  # never wrap the table into cells
    path = os.path.abspath(file)
    o = gb.Options(path=path, size_bytes=nbytes, workloads=chosen, repeats=repeats, seconds=seconds,
                   workers=workers, cold=cold, backends=tuple(backend or ENGINE_BACKENDS),
                   engine_queue_depths=tuple(engine_qd or ENGINE_QUEUE_DEPTHS))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    if not console.is_terminal:  # the progress bar shows nothing there: say what the wait is for
        console.print(f"writing {size} of data to {file} (unless a complete one of gpuio's is there), then "
                      f"{gb.runner.passes(o)} measured passes")
    with Progress(*columns, console=console, transient=True) as bar:
        t = bar.add_task(f"writing {size} of data to {file}", total=nbytes)
        wrote = gb.create_data_file(path, nbytes, progress=lambda d, _: bar.update(t, completed=d), overwrite=force)
        bar.remove_task(t)
        t = bar.add_task("measuring", total=gb.runner.passes(o))

        out = gb.run(o, on_pass=lambda desc, done: bar.update(t, description=desc, completed=done))
    rows = gb.summarize(chosen, out["samples"], o.backends)
    regime = os_cache.regime(cold, out["cache_failure"])
    info = meta.collect(path)
    info.update(file=path, size_bytes=nbytes, data_written_now=wrote, cache_regime=regime,
                cache_note=out["cache_failure"], repeats=repeats, seconds_per_pass=seconds, workers=workers)
    if cold and out["cache_failure"]:
        console.print(f"[yellow]--cold: could not drop caches ({out['cache_failure']}); O_DIRECT still bypasses "
                      "the page cache[/]")
    elif not cold:
        console.print("[dim]page cache not dropped (no --cold); every pass uses O_DIRECT, which bypasses it[/]")
    console.print(bench_views.bench_table(rows, size, regime, info))
    if quick:
        console.print("[dim]--quick: one 0.05 s pass per configuration, a smoke test whose ratios are rough; "
                      "measure without --quick[/]")
    report.write_json(json_path, report.document(info, rows, out["samples"]), overwrite=force)
    console.print(f"JSON: {json_path}")
    if plot:
        report.plot(plot, rows, f"gpuio / raw, {info['device']} ({info['host']}), {regime}, {size}", overwrite=force)
        console.print(f"plot: {plot}")


def _ceiling(quick: bool, json_path: str, verbose: bool, force: bool) -> None:
    """Runs benchmarks/engine_ceiling.py's grid. verbose: its whole log as it comes (every measured point,
    full-width tables); else a transient status line while it runs, then bench_views.ceiling_lines."""
    from rich.console import Console

    from ..bench import ceiling
    from .bench_views import ceiling_lines

    small = dict(kinds=("null", "sim", "paced", "paced-null"), devices="1,2", workers="1,2", seconds=0.03, batch=512,
                 queue_depth=64, shm_mib=2, latency_reads=20, latency_rounds=1, judge_s=0.03) if quick else {}
    if verbose:
        res = ceiling.run(log=lambda m: print(m, flush=True), **small)
    else:
        kept: list[str] = []
        with Console().status("gpuio bench ceiling") as status:
            def log(m: str) -> None:
                if m.startswith(("JUDGED", "SKIP")):
                    kept.append(m)
                status.update(m.strip().splitlines()[0][:90] if m.strip() else "")
            res = ceiling.run(log=log, **small)
        for line in ceiling_lines(res, kept):
            print(line)
    ceiling.write_json(res, json_path, overwrite=force)
    print(f"JSON: {json_path}")
