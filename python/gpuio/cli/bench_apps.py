"""`gpuio bench apps`: the applications (gpuio.apps) at one size, one table. cli/bench.py hands over here
when its first argument is `apps`; the measuring lives in gpuio.apps.bench."""
from __future__ import annotations

from typing import List, Optional

import typer

from . import _check

SIZE_DEFAULT = "tiny"


def bench_apps(size: str, cold: bool, json_path: str, workload: Optional[List[str]], store: Optional[str],
               device: str = "auto") -> None:
    """size: tiny|small|medium|large (gpuio bench's byte-size default means tiny here)."""
    from ..apps import bench as ab

    if size not in ab.SIZES:
        _check.fail("--size", size, f"gpuio bench apps takes one of {', '.join(ab.SIZES)}")
    try:
        ab.select(workload)
    except ValueError as e:
        _check.fail("--workload", ",".join(workload or []), str(e))
    rows = ab.run_all(size, device, cold, store, workload,
                      on_row=lambda r: typer.echo(f"  {r['app']}: {r['check']} ({r['wall_s']:.1f} s)"))
    raise typer.Exit(ab.report(rows, json_path))
