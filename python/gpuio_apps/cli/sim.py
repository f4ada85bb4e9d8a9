"""`gpuio sim`: flash simulator commands (trace replay, synthetic workloads, ZnG study)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from . import _check

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Flash simulator: SSD trace replay, synthetic workloads, ZnG platform study.")


def _fail(e: Exception) -> None:
    """An error the simulator found in its input (a trace it cannot parse, an unknown name): one line, exit 2."""
    raise _check.InputError(str(e)) from e


def _print_stats(s: dict, speed: float | None) -> None:
    lat = s["latency"]
    typer.echo(f"requests {s['requests']} (reads {s['reads']}, writes {s['writes']})  simulated "
               f"{(s['last_completion_ns'] - s['first_arrival_ns']) / 1e9:.6f} s")
    typer.echo(f"IOPS {s['iops']:.0f}  read {s['read_mb_s']:.1f} MB/s  write {s['write_mb_s']:.1f} MB/s")
    typer.echo(f"latency us: p50 {lat['p50_ns'] / 1e3:.1f}  p99 {lat['p99_ns'] / 1e3:.1f}  "
               f"p99.9 {lat['p999_ns'] / 1e3:.1f}  max {lat['max_ns'] / 1e3:.1f}")
    typer.echo(f"WAF {s['waf']:.3f}  GC runs {s['gc_runs']}  GC pages moved {s['gc_pages_moved']}  "
               f"buffer read hits {s['buffer_read_hits']}  folded {s['folded_requests']}")
    if speed is not None:
        typer.echo(f"model speed: {speed:,.0f} simulated requests/s on one core")


@app.command()
def presets() -> None:
    """List SSD presets."""
    from gpuio import sim
    for p in sim.presets():
        typer.echo(p)


TRACE_FORMATS = ("auto", "disksim", "disksim-ms", "disksim-ns", "blkparse")


@app.command()
def replay(trace: Path = typer.Argument(..., help="DiskSim ASCII or blkparse text trace (see --format)"),
           preset: str = typer.Option("znand", help="SSD preset: znand | tlc"),
           format: str = typer.Option("auto", help="disksim: DiskSim ASCII, one request a line: 'time device lba "
                                                   "sectors flags' (512 B sectors; flags bit 0: 1 read, 0 write), "
                                                   "time in DiskSim's float milliseconds (0.250) or, when no time "
                                                   "in the file has a '.', integer nanoseconds; disksim-ms / "
                                                   "disksim-ns: that unit, whatever the file holds; blkparse: "
                                                   "blkparse's default text (Q events); auto: blkparse when the "
                                                   "first field has a comma, else disksim"),
           queue_depth: Optional[int] = typer.Option(None, help="entries per host queue (preset default: 64)"),
           prefill: float = typer.Option(0.0, help="fraction of the drive mapped before the run (steady-state GC)"),
           repeat: int = typer.Option(1, help="replay the trace this many times back to back"),
           as_json: bool = typer.Option(False, "--json", help="print the full statistics as JSON")) -> None:
    """Replay a block trace (DiskSim ASCII as published, or blkparse text) through a simulated SSD."""
    from gpuio import sim
    _check.input_file("TRACE", str(trace))
    _check.choice("--preset", preset, sim.presets())
    _check.choice("--format", format, TRACE_FORMATS)
    if queue_depth is not None:
        _check.int_at_least("--queue-depth", queue_depth, 1)
    _check.number_in("--prefill", prefill, 0.0, 1.0)
    _check.int_at_least("--repeat", repeat, 1)
    try:
        r = sim.replay(trace, preset=preset, queue_depth=queue_depth, prefill=prefill, repeat=repeat) \
            if format == "auto" else sim.replay(sim.load_trace(trace, format), preset=preset,
                                                queue_depth=queue_depth, prefill=prefill, repeat=repeat)
    except (ValueError, FileNotFoundError) as e:
        _fail(e)
    if as_json:
        typer.echo(json.dumps({"stats": r.stats, "model_seconds": r.model_seconds,
                               "requests_per_second": r.requests_per_second, "config": r.config}, indent=1))
    else:
        typer.echo(f"trace {trace}  preset {preset}")
        _print_stats(r.stats, r.requests_per_second)


@app.command()
def synth(preset: str = typer.Option("znand"), requests: int = typer.Option(100_000),
          request_bytes: int = typer.Option(4096), read_ratio: float = typer.Option(1.0),
          sequential: bool = typer.Option(False), queue_depth: int = typer.Option(32),
          queues: int = typer.Option(1), prefill: float = typer.Option(0.0), seed: int = typer.Option(1),
          as_json: bool = typer.Option(False, "--json")) -> None:
    """Run a closed-loop synthetic workload (random or sequential, read ratio, queue depth)."""
    from gpuio import sim
    _check.choice("--preset", preset, sim.presets())
    limits = sim.limits()
    _check.int_in("--requests", requests, 1, limits["workload_requests_max"],
                  f" (the trace is built in memory, {limits['request_bytes']} bytes a request)")
    _check.memory_for("--requests", requests, requests * limits["request_bytes"], "the synthetic trace")
    _check.int_at_least("--request-bytes", request_bytes, 1)
    _check.number_in("--read-ratio", read_ratio, 0.0, 1.0)
    _check.int_at_least("--queue-depth", queue_depth, 1)
    _check.int_at_least("--queues", queues, 1)
    _check.number_in("--prefill", prefill, 0.0, 1.0)
    try:
        t = sim.synthesize(preset, requests, request_bytes, read_ratio, sequential, 0, queues, seed)
        r = sim.replay(t, preset=preset, queue_depth=queue_depth, host_queues=queues, prefill=prefill, seed=seed)
    except ValueError as e:
        _fail(e)
    if as_json:
        typer.echo(json.dumps({"stats": r.stats, "requests_per_second": r.requests_per_second}, indent=1))
    else:
        _print_stats(r.stats, r.requests_per_second)


@app.command()
def zng(report: bool = typer.Option(False, "--report", help="run every platform on every workload; write table and plots"),
        out: Path = typer.Option(Path("."), help="directory for zng_report.md/.json and the plots"),
        scale: float = typer.Option(1.0, help="size of the generated traces (1 = the report's default)"),
        workloads: Optional[str] = typer.Option(None, help="comma list (default: bfs,pagerank,gemm,stencil,vecadd)"),
        trace: Optional[Path] = typer.Option(None, help="a GPU memory trace file (cycle warp pc address size r/w) instead"),
        platform: Optional[str] = typer.Option(None, help="run one platform only and print its result"),
        seed: int = typer.Option(1), plots: bool = typer.Option(True, help="write PNG plots (matplotlib)"),
        force: bool = typer.Option(False, "--force", help="replace report files already in --out")) -> None:
    """ZnG platform study over GPU memory-access traces."""
    from gpuio import sim
    _check.positive_number("--scale", scale)
    if trace is not None:
        _check.input_file("--trace", str(trace))
    if workloads:
        _check.choices("--workloads", workloads, sim.zng_workloads())
    if platform:
        _check.choice("--platform", platform, sim.zng_platforms())
    if report:
        from gpuio_apps.sim_report import PLOT_FILES, REPORT_FILES
        _check.output_dir("--out", str(out))
        for name in REPORT_FILES + (PLOT_FILES if plots else ()):
            _check.output_file("--out", str(out / name), force)
        if plots:
            _check.need("matplotlib", "gpuio sim zng --report (plots; --no-plots skips them)")
    try:
        traces = {trace.name: sim.zng_load_trace(trace)} if trace else None
        names = workloads.split(",") if workloads else None
        if platform and not report:
            if traces is None:
                traces = {w: sim.zng_generate(w, scale, seed) for w in (names or sim.zng_workloads())}
            for name, t in traces.items():
                typer.echo(json.dumps({"workload": name, **sim.zng_run(t, platform)}))
            return
        if not report:
            raise _check.InputError("nothing to do: pass --report, or --platform NAME")
        from gpuio_apps.sim_report import zng_report

        rep = zng_report(out, scale=scale, workloads=names, seed=seed, traces=traces, plots=plots, overwrite=force)
    except (ValueError, FileNotFoundError) as e:
        _fail(e)
    typer.echo((Path(out) / "zng_report.md").read_text())
    typer.echo(f"wrote {out}/zng_report.md, zng_report.json" + (", zng_bandwidth.png, zng_write_redundancy.png" if plots else ""))
    if not all(c["holds"] for c in rep["checks"]):
        typer.echo("note: some orderings do not hold on these traces (see above)")
