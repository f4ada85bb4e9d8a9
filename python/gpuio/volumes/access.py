"""Access control for volumes: cephx users whose capabilities are scoped to one pool namespace.

    access.grant("rbd/team-a/feat", "gpu1", "r", keyring="gpu1.keyring")   # read-only on rbd/team-a
    access.revoke("gpu1")

The OSDs check every request against the client's caps, so a client without rights is refused by the
storage itself (EPERM → PermissionError naming the volume and the client), before any byte is written.
Caps cover a whole namespace: every volume in it. `rw` is Ceph's `profile rbd`, `r` its
`profile rbd-read-only` (reads, no watch/lock, no writes). A revoked client keeps its open session until
its ticket expires; new connections are refused at once.
"""
from __future__ import annotations

import json
import os

from gpuio import outputs

from .api import Identity, _who, parts

ACCESS = {"r": "profile rbd-read-only", "rw": "profile rbd"}


def caps(pool: str, namespace: str, access: str) -> list[str]:
    """The cephx caps (mon, osd) for access ("r"/"rw") to one pool namespace."""
    if access not in ACCESS:
        raise ValueError(f"access must be one of {sorted(ACCESS)}, got {access!r}")
    scope = f"pool={pool}" + (f" namespace={namespace}" if namespace else "")
    return ["mon", "profile rbd", "osd", f"{ACCESS[access]} {scope}"]


def _user(user: str) -> str:
    if not isinstance(user, str) or not user or any(c in user for c in " \t/\n"):
        raise ValueError(f"user must be a cephx id like 'gpu1' (no spaces or '/'), got {user!r}")
    return user if user.startswith("client.") else "client." + user


def _mon(c, cmd: dict):
    rc, out, status = c.mon_command(json.dumps(dict(cmd, format="json")))
    if rc < 0:
        raise OSError(-rc, f"ceph {cmd['prefix']} {cmd.get('entity', '')}: {status or os.strerror(-rc)}")
    return json.loads(out) if out else None


def keyring_of(user: str):
    """A test for gpuio.outputs: True for a keyring file of `user` ('[client.<user>]' first), which grant() may
    replace with the same user's new one."""
    entity = _user(user)

    def ours(path: str) -> bool:
        try:
            with open(path, "rb") as f:
                return f.read(len(entity) + 3).rstrip(b"\n") == f"[{entity}]".encode()
        except OSError:
            return False
    return ours


def grant(volume: str, user: str, access: str = "rw", keyring: str | None = None,
          who: Identity | None = None, overwrite: bool = False) -> str:
    """Give user access ("r" or "rw") to the namespace holding volume (creating the user, or replacing its
    caps). Writes the user's keyring to `keyring` (default ./ceph.<user>.keyring, mode 0600); returns that path.
    An existing file there is replaced only when it is this user's keyring or with overwrite=True (checked
    before the cluster is changed; never a non-regular file)."""
    pool, ns, _ = parts(volume)
    entity = _user(user)
    path = keyring or os.path.join(os.getcwd(), f"ceph.{entity}.keyring")
    outputs.destination(path, overwrite=overwrite, ours=keyring_of(entity))
    want = caps(pool, ns, access)
    c = _who(who).client()
    rc, _, _ = c.mon_command(json.dumps({"prefix": "auth get", "entity": entity, "format": "json"}))
    if rc == 0:
        _mon(c, {"prefix": "auth caps", "entity": entity, "caps": want})
    key = _mon(c, {"prefix": "auth get-or-create", "entity": entity, "caps": want})
    key = key[0]["key"] if isinstance(key, list) else key["key"]
    outputs.write_text(path, f"[{entity}]\n\tkey = {key}\n", overwrite=overwrite, ours=keyring_of(entity), mode=0o600)
    return path


def revoke(user: str, who: Identity | None = None) -> None:
    """Delete the cephx user (all its caps). FileNotFoundError when it does not exist."""
    entity = _user(user)
    c = _who(who).client()
    rc, _, status = c.mon_command(json.dumps({"prefix": "auth get", "entity": entity, "format": "json"}))
    if rc == -2:
        raise FileNotFoundError(2, f"no cephx user {entity} to revoke")
    _mon(c, {"prefix": "auth rm", "entity": entity})


def users(who: Identity | None = None) -> dict[str, list[str]]:
    """client.* users and their osd caps."""
    d = _mon(_who(who).client(), {"prefix": "auth ls"})
    return {e["entity"]: e.get("caps", {}).get("osd", "") for e in d.get("auth_dump", [])
            if e["entity"].startswith("client.")}

__all__ = ["ACCESS", "caps", "keyring_of", "grant", "revoke", "users"]
