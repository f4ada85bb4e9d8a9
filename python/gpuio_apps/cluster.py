"""A throwaway one-node Ceph cluster for tests, demos and benchmarks (`gpuio cluster up/down`).

    c = cluster.up("/tmp/c", osds=3)     # mon, mgr, 3 BlueStore-on-sparse-file OSDs on 127.0.0.1
                                         # (mgr=False: none; the Ceph programs are the ones on PATH)
    c.conf                               # its ceph.conf (CEPH_CONF=... for the rbd/ceph tools)
    cluster.down("/tmp/c")               # stops the daemons it started (by pid), removes the directory

Everything lives in one directory: ceph.conf, keyrings, the mon/mgr/OSD data, sparse OSD block files,
logs, pid files and `cluster.json` (what was started). Replicas 2 (`min_size` 1) over the OSDs, CRUSH
failure domain the OSD (one host). BlueStore on files, never memstore: a memstore OSD fills during a
benchmark and the pool then blocks every client. The mon listens on a free loopback port, so several
clusters (a test run beside a demo) do not collide.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field

from gpuio_apps.knobs import defaults_of

# `gpuio cluster up` and the test fixture use these.
DEFAULTS = defaults_of("cluster")  # a view of the applications' knob table (gpuio_apps.knobs)
PACKAGES = ["ceph-mon", "ceph-osd", "ceph-mgr", "ceph-common", "librados-dev", "librbd-dev"]
# What up() runs: keyrings are written here (no ceph-authtool), `rbd pool init` only where the tool exists.
TOOLS = ["ceph-mon", "ceph-osd", "monmaptool"]


def default_dir() -> str:
    """The directory of CEPH_CONF when that is a gpuio cluster's, else $TMPDIR/gpuio-ceph-<uid>."""
    conf = os.environ.get("CEPH_CONF", "")
    if conf and os.path.exists(os.path.join(os.path.dirname(os.path.abspath(conf)), "cluster.json")):
        return os.path.dirname(os.path.abspath(conf))
    return os.path.join(tempfile.gettempdir(), f"gpuio-ceph-{os.getuid()}")


def direct_io_works(d: str) -> bool:
    """BlueStore opens its block file with O_DIRECT: tmpfs (a RAM /tmp) refuses it."""
    probe = os.path.join(d, f".gpuio-direct-probe-{os.getpid()}")
    try:
        fd = os.open(probe, os.O_CREAT | os.O_RDWR | getattr(os, "O_DIRECT", 0), 0o600)
        os.close(fd)
        return True
    except OSError:
        return False
    finally:
        try:
            os.unlink(probe)
        except OSError:
            pass


def make_dir(prefix: str, fallback: str) -> str:
    """A new cluster directory under $TMPDIR, or under fallback where $TMPDIR has no O_DIRECT (tmpfs)."""
    base = tempfile.gettempdir()
    if not direct_io_works(base):
        os.makedirs(fallback, exist_ok=True)
        base = fallback
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def missing_tools(mgr: bool = DEFAULTS["mgr"]) -> list[str]:
    """The Ceph programs this machine lacks (empty: a cluster can be started)."""
    return [t for t in TOOLS + (["ceph-mgr"] if mgr else []) if shutil.which(t) is None]


def ceph_libdir() -> str:
    """The library directory of the Ceph programs on PATH: /usr/lib/x86_64-linux-gnu for the installed
    packages, <prefix>/usr/lib/<arch> for .debs unpacked under a prefix (`scripts/gpu.sh ceph`'s /tmp/ceph),
    whose plugins (object classes, erasure codes) the daemons must be told about."""
    osd = os.path.realpath(shutil.which("ceph-osd") or "/usr/bin/ceph-osd")
    usr = os.path.dirname(os.path.dirname(osd))
    arch = os.uname().machine + "-linux-gnu"
    return os.path.join(usr, "lib", arch)


@dataclass
class Cluster:
    dir: str
    conf: str
    fsid: str
    mon_port: int
    pool: str
    osds: list[int] = field(default_factory=list)
    started: float = 0.0
    mgr: bool = True

    @property
    def admin_keyring(self) -> str:
        return os.path.join(self.dir, "ceph.client.admin.keyring")

    def pid_file(self, name: str) -> str:
        return os.path.join(self.dir, "run", f"{name}.pid")

    def pids(self) -> dict[str, int]:
        """Daemon name -> pid, for the daemons this cluster started that still have a pid file."""
        out = {}
        run = os.path.join(self.dir, "run")
        for f in sorted(os.listdir(run)) if os.path.isdir(run) else []:
            if f.endswith(".pid"):
                try:
                    out[f[:-4]] = int(open(os.path.join(run, f)).read().strip())
                except (OSError, ValueError):
                    pass
        return out

    def env(self) -> dict:
        """Environment for the ceph/rbd tools and gpuio clients: CEPH_CONF (the admin keyring is in it)."""
        return dict(os.environ, CEPH_CONF=self.conf)

    def client(self, user: str = "admin", keyring: str = ""):
        from gpuio.volumes.api import Identity

        return Identity(conf=self.conf, user=user, keyring=keyring, timeout_s=30).client()

    def save(self) -> None:
        with open(os.path.join(self.dir, "cluster.json"), "w") as f:
            json.dump(asdict(self), f, indent=1)

    # -- OSD faults (tests, the fault campaign) ------------------------------------------------------
    def kill_osd(self, osd: int, sig: int = signal.SIGKILL) -> None:
        pid = self.pids().get(f"osd.{osd}")
        if pid is None:
            raise ValueError(f"osd.{osd} is not running in the cluster at {self.dir}")
        os.kill(pid, sig)
        _wait_gone(pid, 10)

    def start_osd(self, osd: int, wait: bool = True):
        """Start an OSD of this cluster. wait=False returns at once (the Popen; it exits once the daemon
        forked, after BlueStore mounted: ~5 s), so I/O goes on while it boots."""
        cmd = ["ceph-osd", "-c", self.conf, "-i", str(osd)]
        if wait:
            _run(cmd)
            return None
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def mon(self, cmd: dict) -> dict | list | str:
        """One mon command as admin (JSON in and, where the command has it, out). Raises OSError."""
        c = self.client()
        rc, out, status = c.mon_command(json.dumps(dict(cmd, format="json")))
        if rc < 0:
            raise OSError(-rc, f"ceph {cmd.get('prefix')}: {status or os.strerror(-rc)}")
        try:
            return json.loads(out) if out else status
        except ValueError:
            return out.decode()

    def health(self) -> dict:
        """PG states and OSD counts from the mon: {'pgs': {state: n}, 'osds_up': n, 'osds_in': n}."""
        s = self.mon({"prefix": "status"})
        pgs = {p["state_name"]: p["count"] for p in s.get("pgmap", {}).get("pgs_by_state", [])}
        om = s.get("osdmap", {})
        om = om.get("osdmap", om)  # Pacific nests it once more
        return {"pgs": pgs, "num_pgs": s.get("pgmap", {}).get("num_pgs", 0),
                "osds_up": om.get("num_up_osds", 0), "osds_in": om.get("num_in_osds", 0)}

    def wait_clean(self, timeout_s: float = DEFAULTS["timeout_s"], osds_up: int | None = None) -> float:
        """Block until every PG is active+clean (and osds_up OSDs are up); returns the seconds it took."""
        t0 = time.monotonic()
        want_up = len(self.osds) if osds_up is None else osds_up
        last = None
        while True:
            try:
                last = self.health()
                if not self.mgr and last["osds_up"] >= want_up:
                    # PG states come from the mgr: without one, OSDs up and one image created (its
                    # objects written, so their PGs are active) is what "usable" means.
                    if self.pool and self.probe_io():
                        return time.monotonic() - t0
                elif (last["osds_up"] >= want_up and last["num_pgs"] > 0
                        and last["pgs"].get("active+clean", 0) == last["num_pgs"]):
                    return time.monotonic() - t0
            except OSError as e:
                last = str(e)
            if time.monotonic() - t0 > timeout_s:
                raise TimeoutError(f"cluster at {self.dir} not active+clean after {timeout_s:.0f} s: {last}")
            time.sleep(0.25)


    def probe_io(self) -> bool:
        """Create and remove a small image in the pool (False while the pool does not exist yet)."""
        spec = f"rbd:{self.pool}/gpuio-probe-{os.getpid()}"
        c = self.client()
        try:
            c.create(spec, 4 << 20, 4 << 20)
        except OSError as e:
            if e.errno == 2:  # pool not created yet
                return False
            raise
        c.remove(spec)
        return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _runs(cmd: list[str]) -> bool:
    """The program exists and starts (the GPU machine's carried rbd CLI lacks libncurses: on PATH, exit 127)."""
    try:
        return subprocess.run(cmd, capture_output=True).returncode == 0
    except OSError:
        return False


def _run(cmd: list[str], **kw) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-2000:]}")
    return r.stdout


def _wait_gone(pid: int, timeout_s: float) -> bool:
    t = time.monotonic() + timeout_s
    while time.monotonic() < t:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # our own child (started without daemonising): reap it
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return False


def _conf_text(d: str, fsid: str, port: int, size: int, osd_bytes: int, osd_memory: int) -> str:
    lib = ceph_libdir()
    plugins = "" if lib == f"/usr/lib/{os.uname().machine}-linux-gnu" else f"""plugin dir = {lib}/ceph
erasure code dir = {lib}/ceph/erasure-code
osd class dir = {lib}/rados-classes
"""
    return f"""[global]
{plugins}
fsid = {fsid}
mon host = v2:127.0.0.1:{port}
ms bind msgr1 = false
ms bind ipv6 = false
public addr = 127.0.0.1
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = {d}/ceph.client.admin.keyring
run dir = {d}/run
pid file = {d}/run/$name.pid
admin socket = {d}/run/$name.asok
log file = {d}/log/$name.log
log to stderr = false
err to stderr = false
osd pool default size = {size}
osd pool default min size = 1
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool delete = true
mon data avail warn = 1
mon data avail crit = 0
mon warn on pool no redundancy = false
mon osd min down reporters = 1
osd heartbeat interval = 1
osd heartbeat grace = 6
rbd default features = layering,exclusive-lock

[mon]
mon data = {d}/$name
keyring = {d}/$name/keyring

[mgr]
mgr data = {d}/$name
keyring = {d}/$name/keyring

[osd]
osd data = {d}/$name
keyring = {d}/$name/keyring
osd objectstore = bluestore
bluestore block path = {d}/$name.block
bluestore block create = true
bluestore block size = {osd_bytes}
bluestore fsck on mount = false
bluestore cache autotune = false
bluestore cache size = {128 << 20}
osd memory target = {osd_memory}
# sparse files look rotational: without these, recovery sleeps 0.1 s between objects
osd recovery sleep = 0
osd recovery sleep hdd = 0
osd recovery max active = 8
osd max backfills = 8
"""


def up(dir: str | None = None, osds: int = DEFAULTS["osds"], size: int = DEFAULTS["size"],
       pool: str = DEFAULTS["pool"], pgs: int = DEFAULTS["pgs"], osd_bytes: int = DEFAULTS["osd_bytes"],
       timeout_s: float = DEFAULTS["timeout_s"], mgr: bool = DEFAULTS["mgr"], log=None) -> Cluster:
    """Start a cluster in dir (created; must not hold a running one) and wait for active+clean.
    mgr=False starts no mgr (what the GPU machine's carried .debs allow): then "ready" means every OSD up
    and an image created in the pool, since the PG states are the mgr's."""
    if not isinstance(osds, int) or isinstance(osds, bool) or not 1 <= osds <= DEFAULTS["osds_max"]:
        raise ValueError(f"osds must be an int in [1, {DEFAULTS['osds_max']}] (OSD daemons on this one node), "
                         f"got {osds!r}")
    if not isinstance(size, int) or not 1 <= size <= osds:
        raise ValueError(f"size (replicas) must be an int in [1, osds={osds}], got {size!r}")
    missing = missing_tools(mgr)
    if missing:
        raise FileNotFoundError(f"Ceph programs missing: {missing}; install the Debian packages "
                                f"{' '.join(PACKAGES)} (scripts/setup.sh does, as root)")
    say = log or (lambda msg: None)
    d = os.path.abspath(dir or default_dir())
    if os.path.exists(os.path.join(d, "cluster.json")):
        old = load(d)
        if any(_alive(p) for p in old.pids().values()):
            raise FileExistsError(f"a cluster is running in {d}; `gpuio cluster down --dir {d}` first")
        shutil.rmtree(d)
    for sub in ("run", "log", "mgr.x"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    if not direct_io_works(d):
        raise OSError(22, f"{d} does not support O_DIRECT (tmpfs?): BlueStore OSDs need a disk file system; "
                          "pass --dir on one")
    t0 = time.monotonic()
    c = Cluster(dir=d, conf=os.path.join(d, "ceph.conf"), fsid=str(uuid.uuid4()), mon_port=_free_port(),
                pool=pool, started=time.time(), mgr=bool(mgr))
    with open(c.conf, "w") as f:
        f.write(_conf_text(d, c.fsid, c.mon_port, size, osd_bytes, DEFAULTS["osd_memory_bytes"]))
    c.save()
    try:
        _bootstrap(c, osds, pgs, say)
        say(f"daemons started in {time.monotonic() - t0:.1f} s; waiting for active+clean")
        c.wait_clean(timeout_s - (time.monotonic() - t0))
    except BaseException:
        down(d, remove=False)
        raise
    say(f"active+clean after {time.monotonic() - t0:.1f} s")
    return c


def _bootstrap(c: Cluster, osds: int, pgs: int, say) -> None:
    d, conf = c.dir, c.conf
    mon_keyring = os.path.join(d, "mon.keyring")  # mkfs copies it into mon.a/, which must start empty
    admin_caps = {"mon": "allow *", "osd": "allow *", "mgr": "allow *", "mds": "allow *"}
    _write_keyring(c.admin_keyring, "client.admin", _new_key(), admin_caps)
    _write_keyring(mon_keyring, "mon.", _new_key(), {"mon": "allow *"})
    with open(mon_keyring, "a") as f:
        f.write(open(c.admin_keyring).read())
    monmap = os.path.join(d, "monmap")
    _run(["monmaptool", "--create", "--addv", "a", f"[v2:127.0.0.1:{c.mon_port}]", "--fsid", c.fsid, monmap])
    _run(["ceph-mon", "-c", conf, "--mkfs", "-i", "a", "--monmap", monmap, "--keyring", mon_keyring])
    _run(["ceph-mon", "-c", conf, "-i", "a"])
    say(f"mon.a on 127.0.0.1:{c.mon_port}")
    if c.mgr:
        key = c.mon({"prefix": "auth get-or-create", "entity": "mgr.x",
                     "caps": ["mon", "allow profile mgr", "osd", "allow *", "mds", "allow *"]})
        _write_keyring(os.path.join(d, "mgr.x", "keyring"), "mgr.x", _key_of(key))
        _run(["ceph-mgr", "-c", conf, "-i", "x"])
    procs = []
    for _ in range(osds):
        osd_uuid = str(uuid.uuid4())
        osd_id = int(c.mon({"prefix": "osd new", "uuid": osd_uuid})["osdid"])
        # The OSD's cephx key exists before its mkfs (mkfs fetches the mon's config with it).
        key = c.mon({"prefix": "auth get-or-create", "entity": f"osd.{osd_id}",
                     "caps": ["mon", "allow profile osd", "mgr", "allow profile osd", "osd", "allow *"]})
        os.makedirs(os.path.join(d, f"osd.{osd_id}"), exist_ok=True)
        _write_keyring(os.path.join(d, f"osd.{osd_id}", "keyring"), f"osd.{osd_id}", _key_of(key))
        c.osds.append(osd_id)
        procs.append((osd_id, subprocess.Popen(["ceph-osd", "-c", conf, "-i", str(osd_id), "--mkfs",
                                                "--osd-uuid", osd_uuid], stdout=subprocess.PIPE,
                                               stderr=subprocess.STDOUT, text=True)))
    c.save()
    for osd_id, p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"ceph-osd --mkfs of osd.{osd_id} failed: {out.strip()[-2000:]}")
    for osd_id in c.osds:
        c.start_osd(osd_id)
    say(f"{osds} OSDs started")
    c.mon({"prefix": "osd pool create", "pool": c.pool, "pg_num": pgs, "pgp_num": pgs})
    c.mon({"prefix": "osd pool application enable", "pool": c.pool, "app": "rbd"})
    if _runs(["rbd", "--version"]):  # else the first image created initialises the pool (librbd does)
        _run(["rbd", "-c", conf, "pool", "init", c.pool])


def _key_of(reply) -> str:
    if isinstance(reply, dict):
        return reply.get("key", "")
    if isinstance(reply, list):
        return reply[0]["key"]
    raise RuntimeError(f"no key in the mon's reply {reply!r}")


def _new_key() -> str:
    """A new cephx secret as keyrings hold it: base64 of (type 1 = AES, created sec, nsec, length 16, 16
    random bytes), little-endian; what `ceph-authtool --gen-key` writes."""
    now = time.time()
    raw = struct.pack("<HIIH", 1, int(now), int((now % 1) * 1e9), 16) + os.urandom(16)
    return base64.b64encode(raw).decode()


def _write_keyring(path: str, entity: str, key: str, caps: dict | None = None) -> None:
    with open(path, "w") as f:
        f.write(f"[{entity}]\n\tkey = {key}\n")
        for k, v in (caps or {}).items():
            f.write(f'\tcaps {k} = "{v}"\n')
    os.chmod(path, 0o600)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def load(dir: str | None = None) -> Cluster:
    d = os.path.abspath(dir or default_dir())
    try:
        with open(os.path.join(d, "cluster.json")) as f:
            return Cluster(**json.load(f))
    except FileNotFoundError:
        raise FileNotFoundError(f"no gpuio cluster in {d} (cluster.json missing); start one with "
                                f"`gpuio cluster up --dir {d}`") from None


@contextlib.contextmanager
def running(conf: str = "", prefix: str = "gpuio-ceph-", **up_options):
    """The cluster of a running gpuio cluster's ceph.conf (conf), or, without one, a cluster of its own
    started in a new folder under ./build (up(**up_options), progress on stderr) and stopped on exit."""
    if conf:
        yield load(os.path.dirname(os.path.abspath(conf)))
        return
    own = make_dir(prefix, os.path.join(os.getcwd(), "build"))
    up_options.setdefault("log", lambda m: print(m, file=sys.stderr))
    c = up(own, **up_options)
    try:
        yield c
    finally:
        down(own)


def down(dir: str | None = None, remove: bool = True, timeout_s: float = 20.0) -> list[str]:
    """Stop the daemons of the cluster in dir by their pid files (SIGTERM, then SIGKILL after timeout_s),
    then remove dir (remove=False keeps it for its logs). Returns the names of the daemons stopped."""
    c = load(dir)
    stopped = []
    pids = c.pids()
    for name, pid in pids.items():
        if _alive(pid) and _is_ceph(pid, c.dir):
            os.kill(pid, signal.SIGTERM)
            stopped.append(name)
    for name in stopped:
        pid = pids[name]
        if not _wait_gone(pid, timeout_s):
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, 5)
    if remove:
        shutil.rmtree(c.dir, ignore_errors=True)
    return stopped


def _is_ceph(pid: int, d: str) -> bool:
    """The pid still belongs to one of this cluster's daemons (not a reused pid)."""
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return False
    return bool(cmd) and os.path.basename(cmd[0].decode()).startswith("ceph-") and \
        any(os.path.join(d, "ceph.conf").encode() == a for a in cmd)
