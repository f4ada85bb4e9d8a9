"""`gpuio bench apps`: the applications (gpuio_apps.papers) at one size, one table. cli/bench.py hands over here
when its first argument is `apps`; the measuring lives in gpuio_apps.papers.suite."""
from __future__ import annotations

import contextlib
import io
import os
import sys
from typing import List, Optional

import typer

from . import _check

SIZE_DEFAULT = "tiny"


def bench_apps(size: str, cold: bool, json_path: str, workload: Optional[List[str]], store: Optional[str],
               device: str = "auto", verbose: bool = False, force: bool = False) -> None:
    """size: tiny|small|medium|large (gpuio bench's byte-size default means tiny here). Without verbose, the
    apps' own diagnostic lines are held back and the table fits 100 columns; each app's one-line result and
    the judged ratios are printed either way."""
    from ..papers import suite

    if size not in suite.SIZES:
        _check.fail("--size", size, f"gpuio bench apps takes one of {', '.join(suite.SIZES)}")
    try:
        suite.select(workload)
    except ValueError as e:
        _check.fail("--workload", ",".join(workload or []), str(e))
    if store and not store.startswith("rbd:") and not os.path.isdir(store):
        for path in store.split(","):  # files the apps write their data into (RAID-0 over several)
            _check.output_file("--file", path, force)
    out = sys.stdout
    held = contextlib.nullcontext() if verbose else contextlib.redirect_stdout(io.StringIO())
    with held:
        rows = suite.run_all(size, device, cold, store, workload,
                          on_row=lambda r: print(f"  {r['app']}: {r['check']} ({r['wall_s']:.1f} s)"[:None if verbose
                                                 else 100], file=out, flush=True))
    if not verbose:
        typer.echo("(the apps' diagnostic lines and the full table: --verbose)")
    raise typer.Exit(suite.report(rows, json_path, wide=verbose, overwrite=force))
