"""Volumes: Ceph RBD images as gpuio devices.

A volume is an RBD image named `POOL/IMAGE` or `POOL/NAMESPACE/IMAGE` (also written `rbd:...`; a bare
`IMAGE` takes `pool=`/`namespace=`). Its bytes are cut into objects of `object_size` (4 MiB by default):
engine block `b` of `block_size` bytes lies in object number `b * block_size // object_size`, RADOS object
`<object_prefix>.<16 hex digits>`, whose placement group and OSDs CRUSH computes from the object name
(`map()` shows them). Replication is the pool's (`size`/`min_size`).

A client identity is a cephx user, a keyring and a ceph.conf (`Identity`); everything left empty takes
the defaults the `rbd` tool takes: CEPH_CONF (else /etc/ceph/ceph.conf), CEPH_ARGS (`--id`, `--keyring`,
`--conf`), client.admin.
"""
from __future__ import annotations

import builtins
import errno
import json
import os
from dataclasses import dataclass

from gpuio.defaults import defaults_of

DEFAULTS = defaults_of("volumes")  # a view of gpuio.defaults' volumes rows


def _core():
    from gpuio import _core as core

    return core


def _usable_core():
    """gpuio._core once the rbd backend's library (libgpuio_rbd.so.1, with librbd/librados) has loaded; else
    RuntimeError saying why (the library to install, or the build that lacks the backend)."""
    core = _core()
    reason = core.rbd_unavailable()
    if reason:
        raise RuntimeError(reason)
    return core


@dataclass(frozen=True)
class Identity:
    """Who talks to the cluster. Empty fields: CEPH_CONF / CEPH_ARGS / client.admin, like the rbd tool."""

    conf: str = ""
    user: str = ""
    keyring: str = ""
    timeout_s: int = DEFAULTS["timeout_s"]

    def client(self):
        """A connected librados client (gpuio._core.RbdClient). Raises PermissionError/OSError, and
        FileNotFoundError naming the places tried when there is no ceph.conf (conf_file)."""
        core = _usable_core()  # why volumes cannot work at all comes before which conf is missing
        conf_file(self.conf)
        return core.RbdClient(self.conf, self.user, self.keyring, self.timeout_s)

    def rbd_options(self, **extra) -> dict:
        """The engine's `rbd=` options (conf, user, keyring, timeout_s) of this identity, plus `extra`."""
        conf_file(self.conf)
        return dict(conf=self.conf, user=self.user, keyring=self.keyring, timeout_s=self.timeout_s, **extra)


def conf_file(conf: str = "") -> str:
    """The ceph.conf a client with this `conf` reads: `conf` itself, else a `-c/--conf` in CEPH_ARGS, else
    $CEPH_CONF, else the first that exists of librados' search list (/etc/ceph/ceph.conf, ~/.ceph/ceph.conf,
    ./ceph.conf). FileNotFoundError naming the file, or every place tried, when there is none."""
    if conf:
        if not os.path.isfile(conf):
            raise FileNotFoundError(errno.ENOENT, f"ceph.conf {conf!r} does not exist", conf)
        return conf
    args = os.environ.get("CEPH_ARGS", "").split()
    for i, a in enumerate(args):
        if a in ("-c", "--conf") and i + 1 < len(args):
            return conf_file(args[i + 1])
        if a.startswith("--conf="):
            return conf_file(a.partition("=")[2])
    env = os.environ.get("CEPH_CONF", "")
    if env:
        if not os.path.isfile(env):
            raise FileNotFoundError(errno.ENOENT, f"ceph.conf {env!r} (from CEPH_CONF) does not exist", env)
        return env
    tried = ["/etc/ceph/ceph.conf", os.path.expanduser("~/.ceph/ceph.conf"), "./ceph.conf"]
    for path in tried:
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(errno.ENOENT, f"no ceph.conf: CEPH_CONF is unset and none of "
                                          f"{', '.join(tried)} exists (`gpuio cluster up` starts a throwaway "
                                          f"cluster and prints its conf)", "ceph.conf")


def _who(who: Identity | None) -> Identity:
    if who is None:
        return Identity()
    if not isinstance(who, Identity):
        raise TypeError(f"who must be a gpuio.volumes.Identity, got {type(who).__name__}")
    return who


def spec(name: str, pool: str | None = None, namespace: str | None = None) -> str:
    """The full volume name "rbd:POOL[/NAMESPACE]/IMAGE" for name (a bare image name takes pool/namespace)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"volume name must be a non-empty str, got {name!r}")
    bare = name[4:] if name.startswith("rbd:") else name
    if "/" not in bare:
        pool = DEFAULTS["pool"] if pool is None else pool
        namespace = DEFAULTS["namespace"] if namespace is None else namespace
        bare = f"{pool}/{namespace}/{bare}" if namespace else f"{pool}/{bare}"
    elif pool is not None or namespace is not None:
        raise ValueError(f"volume {name!r} already names its pool; drop pool=/namespace=")
    full = "rbd:" + bare
    _core().RbdClient.parse(full)  # ValueError naming it when malformed
    return full


def parts(name: str) -> tuple[str, str, str]:
    """(pool, namespace, image) of a volume name."""
    return tuple(_core().RbdClient.parse(spec(name)))


def _positive(value, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{what} must be a positive int (bytes), got {value!r}")
    return value


def create(name: str, size: int, object_size: int = DEFAULTS["object_size"], pool: str | None = None,
           namespace: str | None = None, who: Identity | None = None) -> str:
    """Create a volume of size bytes (objects of object_size bytes; the namespace is created if new).
    Returns its full name. FileExistsError when it exists."""
    _positive(size, "size")
    _positive(object_size, "object_size")
    v = spec(name, pool, namespace)
    _who(who).client().create(v, size, object_size)
    return v


class ShrinkRefused(ValueError):
    """resize() to fewer bytes than the volume holds, without allow_shrink=True; nothing was changed.
    volume, size_bytes (its size now), new_bytes and lost_bytes (what the shrink would drop) say what."""

    def __init__(self, volume: str, size_bytes: int, new_bytes: int):
        self.volume, self.size_bytes, self.new_bytes = volume, size_bytes, new_bytes
        self.lost_bytes = size_bytes - new_bytes
        super().__init__(f"{volume} holds {size_bytes} bytes: resizing it to {new_bytes} would drop its last "
                         f"{self.lost_bytes} bytes; allow_shrink=True shrinks it")


def check_resize(volume: str, size_bytes: int, new_bytes: int, allow_shrink: bool = False) -> None:
    """Raises ShrinkRefused when going from size_bytes to new_bytes drops data and allow_shrink is False
    (as `rbd resize` asks for --allow-shrink)."""
    if new_bytes < size_bytes and not allow_shrink:
        raise ShrinkRefused(volume, size_bytes, new_bytes)


def resize(name: str, size: int, pool: str | None = None, namespace: str | None = None,
           who: Identity | None = None, allow_shrink: bool = False) -> None:
    """Set a volume's size to `size` bytes. Growing adds zeros; shrinking drops the bytes past `size` and is
    refused (ShrinkRefused, a ValueError naming the bytes lost; nothing changed) unless allow_shrink=True.
    ValueError for a size < 1; FileNotFoundError when the volume is absent."""
    _positive(size, "size")
    v = spec(name, pool, namespace)
    c = _who(who).client()
    check_resize(v, c.info(v)["bytes"], size, allow_shrink)
    c.resize(v, size)


def delete(name: str, pool: str | None = None, namespace: str | None = None, who: Identity | None = None) -> None:
    """Remove a volume and its data. FileNotFoundError when absent; OSError(EBUSY) while a client has it open."""
    _who(who).client().remove(spec(name, pool, namespace))


def list(pool: str | None = None, namespace: str | None = None, who: Identity | None = None) -> builtins.list[dict]:  # noqa: A001
    """Volumes of a pool namespace: [{'name', 'size', 'object_size'}] sorted by name."""
    pool = DEFAULTS["pool"] if pool is None else pool
    namespace = DEFAULTS["namespace"] if namespace is None else namespace
    c = _who(who).client()
    out = []
    for image in sorted(c.list(pool, namespace)):
        v = spec(image, pool, namespace)
        i = c.info(v)
        out.append({"name": v, "size": i["bytes"], "object_size": i["object_bytes"]})
    return out


def info(name: str, pool: str | None = None, namespace: str | None = None, who: Identity | None = None) -> dict:
    """size, object_size, object_prefix, features, lock_owners of a volume."""
    v = spec(name, pool, namespace)
    c = _who(who).client()
    i = c.info(v)
    return {"name": v, "size": i["bytes"], "object_size": i["object_bytes"], "object_prefix": i["object_prefix"],
            "features": i["features"], "lock_owners": c.lock_owners(v)}


def map(name: str, block: int, block_size: int = DEFAULTS["block_size"], pool: str | None = None,  # noqa: A001
        namespace: str | None = None, who: Identity | None = None) -> dict:
    """Where block `block` (of block_size bytes) lives: RADOS object, placement group, up and acting OSDs."""
    if not isinstance(block, int) or block < 0:
        raise ValueError(f"block must be an int >= 0, got {block!r}")
    _positive(block_size, "block_size")
    v = spec(name, pool, namespace)
    p, ns, _ = parts(v)
    c = _who(who).client()
    i = c.info(v)
    offset = block * block_size
    if offset >= i["bytes"]:
        raise IndexError(f"block {block} (offset {offset}) is beyond volume {v} of {i['bytes']} bytes")
    objno = offset // i["object_bytes"]
    obj = f"{i['object_prefix']}.{objno:016x}"
    rc, out, status = c.mon_command(json.dumps({"prefix": "osd map", "pool": p, "object": obj, "nspace": ns,
                                                "format": "json"}))
    if rc < 0:
        raise OSError(-rc, f"osd map of {obj} ({v} block {block}): {status}")
    m = json.loads(out)
    return {"volume": v, "block": block, "offset": offset, "object_number": objno, "object": obj,
            "object_offset": offset % i["object_bytes"], "namespace": ns, "pg": m.get("pgid"),
            "up": m.get("up", []), "acting": m.get("acting", []), "primary": m.get("acting_primary")}


def lock_owners(name: str, pool: str | None = None, namespace: str | None = None,
                who: Identity | None = None) -> builtins.list[str]:
    """Addresses of the clients holding the volume's single-writer lock (empty: none)."""
    return _who(who).client().lock_owners(spec(name, pool, namespace))


def break_lock(name: str, pool: str | None = None, namespace: str | None = None,
               who: Identity | None = None) -> int:
    """Break the writer's lock and blocklist that client (its late writes are refused). Returns how many."""
    return _who(who).client().break_locks(spec(name, pool, namespace))


def open(name: str, mode: str = "r", who: Identity | None = None, pool: str | None = None,  # noqa: A001
         namespace: str | None = None, block_size: int = DEFAULTS["block_size"], lock_wait_s: float = 0,
         break_lock: bool = False, **engine_options):
    """A gpuio.Engine on the volume. mode "r": read-only, no lock; "r+": read-write, takes the volume's
    single-writer lock (held by a live writer: OSError(EBUSY) after lock_wait_s; break_lock=True takes
    it over from a dead writer, fencing it). engine_options go to gpuio.Engine."""
    from gpuio.engine import Engine

    if mode not in ("r", "r+"):
        raise ValueError(f"mode must be 'r' or 'r+', got {mode!r}")
    if not isinstance(lock_wait_s, (int, float)) or lock_wait_s < 0:
        raise ValueError(f"lock_wait_s must be a number >= 0, got {lock_wait_s!r}")
    rbd = _who(who).rbd_options(lock_wait_ms=int(lock_wait_s * 1000), break_lock=bool(break_lock))
    rbd.update(engine_options.pop("rbd", None) or {})
    engine_options.setdefault("workers", DEFAULTS["workers"])
    return Engine(spec(name, pool, namespace), block_size=block_size, backend=engine_options.pop("backend", "rbd"),
                  writable=(mode == "r+"), rbd=rbd, **engine_options)

__all__ = ["DEFAULTS", "Identity", "ShrinkRefused", "check_resize", "conf_file", "spec", "parts", "create", "resize",
           "delete", "list", "info", "map", "lock_owners", "break_lock", "open"]
