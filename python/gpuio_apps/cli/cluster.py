"""`gpuio cluster up/down/status`: a throwaway one-node Ceph cluster (gpuio_apps.cluster). Bad options are
refused in one line before anything starts (exit 2); a failure while starting or stopping is one line, exit 1
(gpuio_apps.cli.main)."""
from __future__ import annotations

import json
from typing import Optional

import typer

from . import _check

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="A throwaway one-node Ceph cluster: mon, mgr, BlueStore-on-file OSDs on 127.0.0.1.")

_DIR = typer.Option(None, "--dir", help="cluster directory (default: $TMPDIR/gpuio-ceph-<uid>)")


def _check_cluster_dir(option: str, path: str) -> None:
    """--dir of `up`: a new folder, an empty one, or one a gpuio cluster used (it holds cluster.json); never
    a folder of other files (up writes ceph.conf, keyrings and OSD files into it)."""
    import os
    if os.path.exists(path) and not os.path.isdir(path):
        _check.fail(option, path, "not a directory")
    if os.path.isdir(path) and os.listdir(path) and not os.path.exists(os.path.join(path, "cluster.json")):
        _check.fail(option, path, "holds files of its own (no cluster.json): give a new or empty directory")


@app.command()
def up(dir: Optional[str] = _DIR,
       osds: int = typer.Option(3, "--osds", help="OSD daemons (BlueStore on sparse files), at most 16: one node "
                                                  "runs them all (~30 threads and up to 896 MiB of RAM each)"),
       size: int = typer.Option(2, "--size", help="replicas of the rbd pool"),
       pool: str = typer.Option("rbd", "--pool", help="the RBD pool to create"),
       mgr: bool = typer.Option(True, "--mgr/--no-mgr", help="start a mgr (PG states); I/O needs none")) -> None:
    """Start the cluster, wait for active+clean, print the conf path (use it as CEPH_CONF)."""
    from gpuio_apps import cluster
    _check.int_in("--osds", osds, 1, cluster.DEFAULTS["osds_max"], " (OSD daemons on this one node)")
    _check.int_in("--size", size, 1, osds, " (replicas: at most --osds)")
    if dir is not None:
        _check_cluster_dir("--dir", dir)
    c = cluster.up(dir, osds=osds, size=size, pool=pool, mgr=mgr, log=lambda m: typer.echo(m, err=True))
    typer.echo(f"pids: {' '.join(f'{k}={v}' for k, v in c.pids().items())}", err=True)
    typer.echo(f"export CEPH_CONF={c.conf}", err=True)
    typer.echo(c.conf)


@app.command()
def down(dir: Optional[str] = _DIR,
         keep: bool = typer.Option(False, "--keep", help="keep the directory (logs) after stopping")) -> None:
    """Stop the daemons this cluster started (by their pid files) and remove its directory."""
    from gpuio_apps import cluster
    stopped = cluster.down(dir, remove=not keep)
    typer.echo(f"stopped: {' '.join(stopped) or 'nothing was running'}")


@app.command()
def status(dir: Optional[str] = _DIR,
           as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """PG states and OSDs up/in of the cluster in --dir."""
    from gpuio_apps import cluster
    c = cluster.load(dir)
    h = c.health()
    h.update(conf=c.conf, pids=c.pids())
    if as_json:
        typer.echo(json.dumps(h, indent=1))
        return
    typer.echo(f"conf {c.conf}\nosds up {h['osds_up']} in {h['osds_in']}\npgs {h['pgs']}\npids {h['pids']}")
