"""`gpuio cluster up/down/status`: a throwaway one-node Ceph cluster (gpuio.volumes.cluster)."""
from __future__ import annotations

import json
from typing import Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="A throwaway one-node Ceph cluster: mon, mgr, BlueStore-on-file OSDs on 127.0.0.1.")

_DIR = typer.Option(None, "--dir", help="cluster directory (default: $TMPDIR/gpuio-ceph-<uid>)")


def _fail(e: Exception) -> None:
    typer.echo(f"error: {e}", err=True)
    raise typer.Exit(2)


@app.command()
def up(dir: Optional[str] = _DIR,
       osds: int = typer.Option(3, "--osds", help="OSD daemons (BlueStore on sparse files)"),
       size: int = typer.Option(2, "--size", help="replicas of the rbd pool"),
       pool: str = typer.Option("rbd", "--pool", help="the RBD pool to create"),
       mgr: bool = typer.Option(True, "--mgr/--no-mgr", help="start a mgr (PG states); I/O needs none")) -> None:
    """Start the cluster, wait for active+clean, print the conf path (use it as CEPH_CONF)."""
    from gpuio.volumes import cluster
    try:
        c = cluster.up(dir, osds=osds, size=size, pool=pool, mgr=mgr, log=lambda m: typer.echo(m, err=True))
    except (OSError, ValueError, RuntimeError, TimeoutError) as e:
        _fail(e)
    typer.echo(f"pids: {' '.join(f'{k}={v}' for k, v in c.pids().items())}", err=True)
    typer.echo(f"export CEPH_CONF={c.conf}", err=True)
    typer.echo(c.conf)


@app.command()
def down(dir: Optional[str] = _DIR,
         keep: bool = typer.Option(False, "--keep", help="keep the directory (logs) after stopping")) -> None:
    """Stop the daemons this cluster started (by their pid files) and remove its directory."""
    from gpuio.volumes import cluster
    try:
        stopped = cluster.down(dir, remove=not keep)
    except (OSError, ValueError) as e:
        _fail(e)
    typer.echo(f"stopped: {' '.join(stopped) or 'nothing was running'}")


@app.command()
def status(dir: Optional[str] = _DIR,
           as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """PG states and OSDs up/in of the cluster in --dir."""
    from gpuio.volumes import cluster
    try:
        c = cluster.load(dir)
        h = c.health()
    except (OSError, ValueError) as e:
        _fail(e)
    h.update(conf=c.conf, pids=c.pids())
    if as_json:
        typer.echo(json.dumps(h, indent=1))
        return
    typer.echo(f"conf {c.conf}\nosds up {h['osds_up']} in {h['osds_in']}\npgs {h['pgs']}\npids {h['pids']}")
