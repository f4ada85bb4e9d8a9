"""`gpuio volume ...`: Ceph RBD volumes for gpuio (create/resize/delete/list/info/map/grant/revoke/
break-lock). Client identity: --conf/--id/--keyring, else CEPH_CONF/CEPH_ARGS/client.admin like `rbd`.

Errors in the CLI's style (gpuio_apps.cli): a bad argument or a missing ceph.conf is one line naming it, exit 2,
before the cluster is contacted; a failure the cluster reports (no such volume, permission, timeout) is one
line, exit 1."""
from __future__ import annotations

import json
import re
from typing import Optional

import typer

from . import _check, _knobs

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Ceph RBD volumes: create, resize, delete, list, map blocks to OSDs, grant access.")

_CONF = typer.Option("", "--conf", "-c", help="ceph.conf (default: CEPH_CONF, /etc/ceph/ceph.conf)")
_ID = typer.Option("", "--id", help="cephx user without 'client.' (default: CEPH_ARGS --id, else admin)")
_KEYRING = typer.Option("", "--keyring", "-k", help="keyring (default: the conf's)")
_POOL = typer.Option(None, "--pool", "-p", help="pool, when NAME is a bare image name (default: rbd)")
_NS = typer.Option(None, "--namespace", help="namespace, when NAME is a bare image name")
_NAME = typer.Argument(..., help="volume: POOL/IMAGE, POOL/NAMESPACE/IMAGE or IMAGE (with --pool)")


def _who(conf: str, user: str, keyring: str):
    """The client identity, after the input checks: --conf (or the ceph.conf it defaults to) must exist,
    --keyring too when given."""
    from gpuio.volumes import Identity, conf_file
    try:
        conf_file(conf)
    except FileNotFoundError as e:
        if not conf:
            raise _check.InputError(f"--conf not given and {e.strerror}") from None
        _check.fail("--conf", conf, e.strerror)
    if keyring:
        _check.input_file("--keyring", keyring)
    return Identity(conf=conf, user=user, keyring=keyring)


def _size(option: str, text: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", text.strip().lower())
    if not m:
        _check.fail(option, text, "not a byte count like 4096, 64M or 10GiB")
    return int(float(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2)])


def _run(fn):
    """fn's result; a ValueError/IndexError from the library (a malformed name or argument) becomes an input
    error (exit 2); a failure the cluster reports propagates to gpuio_apps.cli.main (one line, exit 1)."""
    try:
        return fn()
    except (ValueError, IndexError) as e:
        raise _check.InputError(str(e)) from e


@app.command()
def create(name: str = _NAME, size: str = typer.Argument(..., help="bytes, or with K/M/G/T"),
           object_size: str = typer.Option("4M", help="bytes per RADOS object"), pool: Optional[str] = _POOL,
           namespace: Optional[str] = _NS, conf: str = _CONF, id: str = _ID, keyring: str = _KEYRING) -> None:
    """Create a volume (an RBD image with the exclusive-lock feature)."""
    from gpuio import volumes
    v = _run(lambda: volumes.create(name, _size("SIZE", size), _size("--object-size", object_size), pool, namespace,
                                    _who(conf, id, keyring)))
    typer.echo(v)


@app.command()
def resize(name: str = _NAME, size: str = typer.Argument(..., help="bytes, or with K/M/G/T"),
           allow_shrink: bool = typer.Option(False, "--allow-shrink", help="Allow a SIZE below the volume's: the "
                                             "bytes past SIZE are dropped. Without it a shrink is refused."),
           pool: Optional[str] = _POOL, namespace: Optional[str] = _NS, conf: str = _CONF, id: str = _ID,
           keyring: str = _KEYRING) -> None:
    """Grow a volume, or shrink it with --allow-shrink (as `rbd resize`)."""
    from gpuio import volumes
    nbytes = _size("SIZE", size)
    try:
        _run(lambda: volumes.resize(name, nbytes, pool, namespace, _who(conf, id, keyring), allow_shrink=allow_shrink))
    except _check.InputError as e:
        refused = e.__cause__
        if not isinstance(refused, volumes.ShrinkRefused):
            raise
        _check.fail("SIZE", size, f"{refused.volume} holds {refused.size_bytes} bytes; shrinking it to "
                                  f"{refused.new_bytes} would drop the last {refused.lost_bytes} bytes "
                                  "(pass --allow-shrink to shrink it)")


@app.command()
def delete(name: str = _NAME, pool: Optional[str] = _POOL, namespace: Optional[str] = _NS, conf: str = _CONF,
           id: str = _ID, keyring: str = _KEYRING) -> None:
    """Delete a volume and its data."""
    from gpuio import volumes
    _run(lambda: volumes.delete(name, pool, namespace, _who(conf, id, keyring)))


@app.command("list")
def list_(pool: str = typer.Option("rbd", "--pool", "-p"), namespace: str = typer.Option("", "--namespace"),
          conf: str = _CONF, id: str = _ID, keyring: str = _KEYRING,
          as_json: bool = typer.Option(False, "--json")) -> None:
    """Volumes of a pool namespace with their sizes."""
    from gpuio import volumes
    vols = _run(lambda: volumes.list(pool, namespace, _who(conf, id, keyring)))
    if as_json:
        typer.echo(json.dumps(vols, indent=1))
        return
    for v in vols:
        typer.echo(f"{v['name']}\t{v['size']}\tobject_size={v['object_size']}")


@app.command()
def info(name: str = _NAME, pool: Optional[str] = _POOL, namespace: Optional[str] = _NS, conf: str = _CONF,
         id: str = _ID, keyring: str = _KEYRING) -> None:
    """Size, object size and prefix, lock owners (JSON)."""
    from gpuio import volumes
    typer.echo(json.dumps(_run(lambda: volumes.info(name, pool, namespace, _who(conf, id, keyring))), indent=1))


@app.command("map")
def map_(name: str = _NAME, block: int = typer.Argument(..., help="engine block number"),
         block_size: int = _knobs.option("volume", "volumes.block_size"), pool: Optional[str] = _POOL,
         namespace: Optional[str] = _NS, conf: str = _CONF, id: str = _ID, keyring: str = _KEYRING,
         as_json: bool = typer.Option(False, "--json")) -> None:
    """Where a block lives: RADOS object name, placement group, acting OSD set (CRUSH)."""
    from gpuio import volumes
    m = _run(lambda: volumes.map(name, block, block_size, pool, namespace, _who(conf, id, keyring)))
    if as_json:
        typer.echo(json.dumps(m, indent=1))
        return
    typer.echo(f"volume {m['volume']} block {block} (offset {m['offset']}) -> object {m['object']} "
               f"(namespace '{m['namespace']}', offset {m['object_offset']}) -> pg {m['pg']} -> "
               f"acting OSDs {m['acting']} (primary osd.{m['primary']})")


@app.command()
def grant(name: str = _NAME, user: str = typer.Argument(..., help="cephx id to create/update, e.g. gpu1"),
          read_only: bool = typer.Option(False, "--read-only", help="read-only caps (default read-write)"),
          out: Optional[str] = typer.Option(None, "--out", "-o", help="keyring file to write (default "
                                            "./ceph.client.<user>.keyring); an existing file only when it is "
                                            "this user's keyring, or with --force"),
          force: bool = typer.Option(False, "--force", help="replace --out whatever it holds (never a device, "
                                                            "fifo or directory)"),
          conf: str = _CONF, id: str = _ID, keyring: str = _KEYRING) -> None:
    """Give a cephx user access to the pool namespace holding NAME (all its volumes); writes its keyring."""
    from gpuio import volumes
    from gpuio.volumes.access import keyring_of
    if out is not None:
        _check.output_file("--out", out, force, ours=_run(lambda: keyring_of(user)))
    path = _run(lambda: volumes.grant(name, user, "r" if read_only else "rw", out, _who(conf, id, keyring),
                                      overwrite=force))
    typer.echo(path)


@app.command()
def revoke(user: str = typer.Argument(..., help="cephx id to delete"), conf: str = _CONF, id: str = _ID,
           keyring: str = _KEYRING) -> None:
    """Delete a cephx user: its new connections are refused."""
    from gpuio import volumes
    _run(lambda: volumes.revoke(user, _who(conf, id, keyring)))


@app.command("break-lock")
def break_lock(name: str = _NAME, pool: Optional[str] = _POOL, namespace: Optional[str] = _NS,
               conf: str = _CONF, id: str = _ID, keyring: str = _KEYRING) -> None:
    """Break a (dead) writer's lock; that client is blocklisted, so its late writes are refused."""
    from gpuio import volumes
    n = _run(lambda: volumes.break_lock(name, pool, namespace, _who(conf, id, keyring)))
    typer.echo(f"broke {n} lock(s)")
