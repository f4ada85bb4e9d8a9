"""Access control on volumes: cephx users with caps scoped to a pool namespace. Every refusal is a
PermissionError naming the volume and the client, comes back within the client timeout (never a hang),
and leaves the volume's bytes as they were (never a partial write)."""
from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

from gpuio import volumes
from volumes_util import admin, fresh, pattern


@pytest.fixture(scope="module")
def team(ceph_cluster, tmp_path_factory):
    """A volume in namespace team-a with known contents, and keyrings of: a read-only and a read-write
    user of team-a, a read-write user of team-b, and a user with no caps at all."""
    who = admin(ceph_cluster)
    d = tmp_path_factory.mktemp("keys")
    v = volumes.create(fresh("acl", namespace="team-a"), 1 << 20, who=who)
    with volumes.open(v, "r+", who=who) as eng:
        eng.write(np.arange(256), pattern(1, range(256)))
    tag = f"{os.getpid()}"
    users = {"ro": ("team-a", "r"), "rw": ("team-a", "rw"), "other": ("team-b", "rw")}
    ids = {}
    for role, (ns, access) in users.items():
        user = f"{role}{tag}"
        ids[role] = admin(ceph_cluster, user=user, keyring=volumes.grant(
            f"rbd/{ns}/any", user, access, keyring=str(d / f"{user}.keyring"), who=who), timeout_s=10)
    nocaps = f"nocaps{tag}"
    out = str(d / f"{nocaps}.keyring")
    rc, body, status = ceph_cluster.client().mon_command(json.dumps(
        {"prefix": "auth get-or-create", "entity": f"client.{nocaps}", "format": "json"}))
    assert rc == 0, status
    with open(out, "w") as f:
        f.write(f"[client.{nocaps}]\n\tkey = {json.loads(body)[0]['key']}\n")
    ids["nocaps"] = admin(ceph_cluster, user=nocaps, keyring=out, timeout_s=10)
    return v, ids, who


def _unchanged(v, who):
    with volumes.open(v, "r", who=who) as eng:
        out = np.empty(256 * 4096, np.uint8)
        eng.read(np.arange(256), out)
    assert np.array_equal(out, pattern(1, range(256))), "a refused client changed the volume"


def _refused(v, who, mode):
    with pytest.raises(PermissionError) as e:
        with volumes.open(v, mode, who=who) as eng:
            eng.write([0, 1], np.zeros(8192, np.uint8))
    text = str(e.value)
    assert v in text and f"client.{who.user}" in text, text
    return e.value


def test_no_caps_refused_read_and_write(team):
    v, ids, who = team
    for mode in ("r", "r+"):
        _refused(v, ids["nocaps"], mode)
    _unchanged(v, who)


def test_read_only_caps_read_but_never_write(team):
    v, ids, who = team
    with volumes.open(v, "r", who=ids["ro"]) as eng:
        out = np.empty(4 * 4096, np.uint8)
        eng.read([0, 1, 2, 3], out)
        assert np.array_equal(out, pattern(1, [0, 1, 2, 3]))
        with pytest.raises(OSError) as e:  # a read-only engine: librbd refuses before any OSD sees it
            eng.write([0], np.zeros(4096, np.uint8))
        assert v in str(e.value)
    _refused(v, ids["ro"], "r+")  # opening for writing needs write caps (the header watch and lock)
    _unchanged(v, who)


def test_other_namespace_refused(team):
    v, ids, who = team
    for mode in ("r", "r+"):
        _refused(v, ids["other"], mode)
    mine = volumes.create(fresh("own", namespace="team-b"), 1 << 20, who=who)
    with volumes.open(mine, "r+", who=ids["other"]) as eng:  # its own namespace works
        eng.write([0], pattern(2, [0]))
    _unchanged(v, who)


def test_read_write_caps_write_and_revoke_refuses_new_sessions(team, ceph_cluster):
    v, ids, who = team
    rw = ids["rw"]
    scratch = volumes.create(fresh("rw", namespace="team-a"), 1 << 20, who=who)
    with volumes.open(scratch, "r+", who=rw) as eng:
        eng.write([3], pattern(5, [3]))
        out = np.empty(4096, np.uint8)
        eng.read([3], out)
        assert np.array_equal(out, pattern(5, [3]))
    assert any(u == f"client.{rw.user}" for u in volumes.users(who=who))
    volumes.revoke(rw.user, who=who)
    with pytest.raises(PermissionError, match=f"client.{rw.user}"):
        volumes.open(scratch, "r", who=rw)
    with pytest.raises(FileNotFoundError):
        volumes.revoke(rw.user, who=who)


def test_grant_cli_writes_a_usable_keyring(team, ceph_cluster, tmp_path):
    v, ids, who = team
    user = f"cli{os.getpid()}"
    r = subprocess.run([__import__("sys").executable, "-m", "gpuio_apps", "volume", "grant",
                        v, user, "--read-only", "-o", str(tmp_path / "k")], capture_output=True, text=True,
                       env=ceph_cluster.env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(tmp_path / "k")
    ro = admin(ceph_cluster, user=user, keyring=str(tmp_path / "k"))
    with volumes.open(v, "r", who=ro) as eng:
        out = np.empty(4096, np.uint8)
        eng.read([9], out)
        assert np.array_equal(out, pattern(1, [9]))
    _refused(v, ro, "r+")
