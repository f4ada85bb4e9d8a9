"""Volumes on Ceph, side by side in one run on one cluster: gpuio's rbd backend vs "Basic" vs fio's rbd
engine, 1..16 client processes, 4 KiB / 64 KiB, random / sequential, read / write, replicas 2.

    python benchmarks/volumes_bench.py                      # starts its own cluster (3 OSDs), full grid
    python benchmarks/volumes_bench.py --conf C --clients 1,4 --sizes 4096 --patterns rand --ops read

- gpuio: each client process opens the volume with gpuio.volumes.open (backend rbd, 1 worker,
  queue_depth = `--qd`, fio's iodepth) and keeps `--batches` read_async/write_async batches of `--batch`
  requests outstanding, refilling whichever ends first (Engine.wait_any). The engine keeps queue_depth of
  those requests with librbd and issues the next as each completes (engine/direct.hpp), so qd requests are in
  flight request by request, as fio's are; reads land in the caller's buffer. Requests are not merged
  (io_bytes_max = request size), so every tool sends the same requests. `--batches 4 --batch 8` is the
  earlier shape (4 x 8 = 32 in flight, a batch refilled only when its slowest request ended).
- Basic (GNStor's CPU-centric baseline): one synchronous librbd call (rbd_read/rbd_write, via ctypes on
  the system's librbd) per request into a bounce buffer, then a memcpy to the destination.
- fio: `fio --ioengine=rbd`, one job per client, iodepth = --qd, with `rbd cache = false` like the others
  (librbd's default cache acknowledges writes before the OSDs hold them).
Reads share one prefilled volume (readers take no lock); writes go to one volume per client (a writer holds
its volume's lock). Each cell runs --seconds after every client connected, --repeat times per tool with the tools interleaved
(the median is reported: on a shared box the load changes between runs). "client cores" is the CPU time
of the client processes (every thread, librbd's included) over the measured time; "osd cores" that of the cluster's daemons. On a 2-core box
clients and OSDs share the CPUs: compare ratios within one run, not absolute rates (BENCHMARKS.md).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

TOOLS = ("gpuio", "basic", "fio")
# --baseline DIR adds this tool: the gpuio client with DIR (a gpuio checkout's python/ with its _core module) first
# on PYTHONPATH, interleaved with the others in the same cells: before/after a change in one run.
BASELINE = "gpuio-base"


# -- clients (each runs in its own process: `volumes_bench.py --client JSON`) ------------------------------
def _offsets(rng, pattern: str, n_req: int, count: int, start: int = 0) -> np.ndarray:
    if pattern == "rand":
        return rng.integers(0, n_req, count)
    return (start + np.arange(count)) % n_req


class _Offsets:
    """The request offsets of one client, drawn before the clock starts: slicing a drawn array costs well
    under a microsecond, where a NumPy draw per batch cost 8 us per 4 KiB request on this box (fio draws in C)."""

    def __init__(self, rng, pattern: str, n_req: int, per: int, count: int = 1 << 18):
        self.per, self.count = per, max(per, count - count % per)
        # sequential: every client from the volume's first request, as each fio job starts at offset 0 (clients
        # that started at random places read other objects than fio's jobs, which share the OSDs' caches)
        self.ids = _offsets(rng, pattern, n_req, self.count, start=0)
        self.pos = 0

    def next(self) -> np.ndarray:
        if self.pos + self.per > self.count:  # reused cyclically (2^18 requests: more than a cell issues)
            self.pos = 0
        out = self.ids[self.pos:self.pos + self.per]
        self.pos += self.per
        return out


def client_gpuio(a: dict) -> dict:
    from gpuio import volumes

    who = volumes.Identity(conf=a["conf"])
    bs, qd = a["bs"], a["qd"]
    nb, per = max(1, a.get("batches", 2)), max(1, a.get("batch", 128))
    eng = volumes.open(a["volume"], "r+" if a["op"] == "write" else "r", who=who, block_size=bs, workers=1,
                       queue_depth=qd, io_bytes_max=bs)
    n_req = eng.total_blocks
    rng = np.random.default_rng(a["seed"])
    bufs = [np.full(per * bs, 0x5A, np.uint8) for _ in range(nb)]
    submit = eng.write_async if a["op"] == "write" else eng.read_async
    offsets = _Offsets(rng, a["pattern"], n_req, per)
    _wait_start(a["start_at"])
    t_end = time.monotonic() + a["seconds"]
    c0, t0, done0 = _cpu(), time.monotonic(), eng.stats()["ops"]
    inflight, order = [], []
    for i in range(nb):
        inflight.append(submit(offsets.next(), bufs[i]))
        order.append(i)
    wait_any = getattr(eng, "wait_any", None)  # absent in a --baseline from before it existed
    while True:
        # Refill whichever batch finished first (completions come out of order across OSDs). Without
        # wait_any: the first found done, else block on the oldest.
        if wait_any is not None:
            i = wait_any(inflight)
        else:
            i = next((k for k in order if inflight[k].done()), order[0])
        inflight[i].wait()
        if time.monotonic() >= t_end:
            break
        inflight[i] = submit(offsets.next(), bufs[i])
        order.remove(i)
        order.append(i)
    # Requests completed in the window, counted by the engine (a batch of --batch requests would otherwise
    # round the count to whole batches); the drain after it is not timed.
    ops, wall, cpu = eng.stats()["ops"] - done0, time.monotonic() - t0, _cpu() - c0
    for h in inflight:
        h.wait()
    eng.close()
    return {"ops": ops, "wall": wall, "cpu": cpu}


def _librbd(conf: str, volume: str, write: bool):
    """Basic's synchronous librbd client (gpuio_apps.basic_volume; its .rbd/.image are called directly)."""
    from gpuio.volumes import Identity
    from gpuio_apps.basic_volume import SyncVolume

    return SyncVolume(volume, writable=write, who=Identity(conf=conf))


def client_basic(a: dict) -> dict:
    lib = _librbd(a["conf"], a["volume"], a["op"] == "write")
    bs = a["bs"]
    n_req = lib.size // bs
    rng = np.random.default_rng(a["seed"])
    bounce = np.zeros(bs, np.uint8)
    dest = np.full(1024 * bs, 0x5A, np.uint8)
    bp = bounce.ctypes.data
    call = lib.rbd.rbd_write if a["op"] == "write" else lib.rbd.rbd_read
    offsets = _Offsets(rng, a["pattern"], n_req, 64)
    _wait_start(a["start_at"])
    t_end = time.monotonic() + a["seconds"]
    c0, t0 = _cpu(), time.monotonic()
    ops = 0
    while ops == 0 or time.monotonic() < t_end:  # one round at least, however loaded the box
        for off in offsets.next().tolist():
            slot = (ops % 1024) * bs
            if a["op"] == "write":
                bounce[:] = dest[slot:slot + bs]  # memcpy from the source into the I/O buffer
            rc = call(lib.image, int(off) * bs, bs, bp)
            if rc != bs:
                raise OSError(-rc if rc < 0 else 5, f"basic {a['op']} at {off * bs}: {rc}")
            if a["op"] == "read":
                dest[slot:slot + bs] = bounce  # memcpy to the destination
            ops += 1
    wall, cpu = time.monotonic() - t0, _cpu() - c0
    lib.close()
    return {"ops": ops, "wall": wall, "cpu": cpu}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _wait_start(at: float) -> None:
    while time.time() < at:
        time.sleep(min(0.01, max(0.0, at - time.time())))


# -- the driver -----------------------------------------------------------------------------------------
def _daemon_cpu(pids) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total


def run_processes(tool: str, cfg: dict, volumes_for: list[str], cluster) -> dict:
    n = len(volumes_for)
    start_at = time.time() + 3 + 0.5 * n  # every client imported and connected by then
    env = None
    if tool == BASELINE:  # the same client code on the baseline's gpuio, in its own batch shape
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (cfg["baseline"], os.environ.get("PYTHONPATH")) if p))
        tool = "gpuio"
        cfg = dict(cfg, batches=cfg["base_batches"], batch=cfg["base_batch"])
    procs = []
    for i, v in enumerate(volumes_for):
        a = dict(cfg, volume=v, seed=1000 + i, start_at=start_at, tool=tool)
        procs.append(subprocess.Popen([sys.executable, __file__, "--client", json.dumps(a)],
                                      stdout=subprocess.PIPE, text=True, env=env))
    d0 = None
    while time.time() < start_at:
        time.sleep(0.01)
    d0 = _daemon_cpu(cluster.pids().values())
    t0 = time.monotonic()
    res = []
    for p in procs:
        out, _ = p.communicate(timeout=cfg["seconds"] + 120)
        if p.returncode != 0:
            raise RuntimeError(f"{tool} client failed ({p.returncode}): {out[-2000:]}")
        res.append(json.loads(out.strip().splitlines()[-1]))
    wall = time.monotonic() - t0
    osd = _daemon_cpu(cluster.pids().values()) - d0
    ops = sum(r["ops"] for r in res)
    secs = max(r["wall"] for r in res)
    return {"iops": ops / secs, "client_cores": sum(r["cpu"] for r in res) / secs, "osd_cores": osd / wall}


def run_fio(cfg: dict, volumes_for: list[str], cluster) -> dict:
    jobs = [f"[global]\nioengine=rbd\nclientname=admin\nthread=0\ntime_based=1\nruntime={cfg['seconds']}\n"
            f"ramp_time=0\nbs={cfg['bs']}\niodepth={cfg['qd']}\n"
            f"rw={'rand' if cfg['pattern'] == 'rand' else ''}{cfg['op']}\ninvalidate=0\ndirect=1\n"]
    for i, v in enumerate(volumes_for):
        pool, _, image = v.removeprefix("rbd:").partition("/")
        jobs.append(f"[c{i}]\npool={pool}\nrbdname={image}\n")
    with tempfile.NamedTemporaryFile("w", suffix=".fio", delete=False) as f:
        f.write("".join(jobs))
    # fio's rbd engine reads only the conf file: the same client settings as gpuio and Basic (no librbd
    # cache: its default "writearound" acknowledges a write before the OSDs have it).
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as cf:
        cf.write(open(cluster.conf).read() + "\n[client]\nrbd cache = false\n")
    d0 = _daemon_cpu(cluster.pids().values())
    u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(["fio", "--output-format=json", f.name], capture_output=True, text=True,
                       env=dict(os.environ, CEPH_CONF=cf.name), timeout=cfg["seconds"] + 180)
    wall = time.monotonic() - t0
    os.unlink(f.name)
    os.unlink(cf.name)
    if r.returncode != 0:
        raise RuntimeError(f"fio failed: {r.stderr[-2000:] or r.stdout[-2000:]}")
    out = json.loads(r.stdout[r.stdout.index("{"):])
    iops = sum(j[cfg["op"]]["iops"] for j in out["jobs"])
    # fio's own usr_cpu/sys_cpu cover its job thread only; the children's rusage covers every thread
    # (librbd's too) of fio and its job processes, setup included: an upper bound, like the others' figures.
    u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cores = (u1.ru_utime - u0.ru_utime + u1.ru_stime - u0.ru_stime) / cfg["seconds"]
    osd = (_daemon_cpu(cluster.pids().values()) - d0) / wall
    return {"iops": iops, "client_cores": cores, "osd_cores": osd}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--conf", default="", help="ceph.conf of a running gpuio cluster (default: start one)")
    ap.add_argument("--osds", type=int, default=3, help="OSDs of the cluster it starts (no --conf)")
    ap.add_argument("--replicas", type=int, default=2, help="pool size of that cluster (at most --osds)")
    ap.add_argument("--clients", default="1,2,4,8,16")
    ap.add_argument("--sizes", default="4096,65536")
    ap.add_argument("--patterns", default="rand,seq")
    ap.add_argument("--ops", default="read,write")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--seconds", type=float, default=3.0, help="per cell")
    ap.add_argument("--qd", type=int, default=32, help="requests in flight per client (gpuio, fio)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per tool and cell, interleaved; the median is shown")
    ap.add_argument("--batches", type=int, default=2, help="gpuio: batches outstanding per client")
    ap.add_argument("--batch", type=int, default=128, help="gpuio: requests per batch (the engine keeps --qd of "
                    "them with librbd, refilled per completion)")
    ap.add_argument("--baseline-batches", type=int, default=0, help=f"{BASELINE}: batches outstanding (0: --batches)")
    ap.add_argument("--baseline-batch", type=int, default=0, help=f"{BASELINE}: requests per batch (0: --batch; "
                    "a gpuio from before the engine capped caller-submitted requests at queue_depth keeps them all "
                    "in flight, so give it batches x batch = --qd, e.g. 4 and 8)")
    ap.add_argument("--volume-mib", type=int, default=256, help="size of the shared read volume")
    ap.add_argument("--baseline", default="", help=f"also run the gpuio client as tool {BASELINE!r} on the gpuio "
                    "package under this directory (e.g. an older checkout's python/ with its built _core module)")
    ap.add_argument("--json", default="", help="write the rows to this file")
    a = ap.parse_args()
    if a.client:
        c = json.loads(a.client)
        print(json.dumps(client_gpuio(c) if c["tool"] == "gpuio" else client_basic(c)), flush=True)
        return 0
    from gpuio import volumes
    from gpuio_apps import cluster as cl

    for name in ("qd", "batches", "batch", "repeat"):
        if getattr(a, name) < 1:
            ap.error(f"--{name}: {getattr(a, name)} is not a positive count")
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    clients, sizes = ints(a.clients), ints(a.sizes)
    patterns, ops, tools = a.patterns.split(","), a.ops.split(","), a.tools.split(",")
    for t in tools:
        if t not in TOOLS:
            ap.error(f"--tools: unknown tool {t!r}; known: {', '.join(TOOLS)}")
    if a.baseline:
        if not os.path.isdir(os.path.join(a.baseline, "gpuio")):
            ap.error(f"--baseline: no gpuio package under {a.baseline!r}")
        tools.insert(tools.index("gpuio") + 1 if "gpuio" in tools else 0, BASELINE)
    rows = []
    with cl.running(a.conf, "gpuio-bench-ceph-", osds=a.osds, size=min(a.replicas, a.osds)) as c:
        who = volumes.Identity(conf=c.conf)
        tag = f"bench{os.getpid()}"
        shared = volumes.create(f"rbd/{tag}-read", a.volume_mib << 20, who=who)
        with volumes.open(shared, "r+", who=who, block_size=65536) as eng:  # prefill: reads hit real objects
            per = 256  # 16 MiB per batch
            buf = np.random.default_rng(0).integers(0, 256, per * 65536, dtype=np.uint8)
            for s in range(0, eng.total_blocks, per):
                k = min(per, eng.total_blocks - s)
                eng.write(np.arange(s, s + k), buf[:k * 65536])
        writes = [volumes.create(f"rbd/{tag}-w{i}", 64 << 20, who=who) for i in range(max(clients))]
        replicas = c.mon({"prefix": "osd pool get", "pool": c.pool, "var": "size"})["size"]
        print(f"cluster {c.conf}: {len(c.osds)} OSDs, replicas {replicas}; {a.seconds:g} s per cell, qd {a.qd} "
              f"(gpuio: {a.batches} batches of {a.batch} outstanding, queue_depth {a.qd})",
              file=sys.stderr)
        for op in ops:
            for bs in sizes:
                for pattern in patterns:
                    for n in clients:
                        vols = [shared] * n if op == "read" else writes[:n]
                        cfg = dict(conf=c.conf, op=op, bs=bs, pattern=pattern, seconds=a.seconds, qd=a.qd,
                                   batches=a.batches, batch=a.batch, base_batches=a.baseline_batches or a.batches,
                                   base_batch=a.baseline_batch or a.batch, baseline=os.path.abspath(a.baseline) if a.baseline else "")
                        row = {"op": op, "bs": bs, "pattern": pattern, "clients": n, "qd": a.qd,
                               "gpuio_batches": f"{a.batches}x{a.batch}",
                               "osds": len(c.osds), "load": os.getloadavg()[0]}
                        runs = {t: [] for t in tools}
                        for _ in range(a.repeat):  # tools interleaved, so load changes hit each alike
                            for t in tools:
                                runs[t].append(run_fio(cfg, vols, c) if t == "fio" else run_processes(t, cfg, vols, c))
                        for t in tools:  # the median run by IOPS
                            row[t] = sorted(runs[t], key=lambda x: x["iops"])[len(runs[t]) // 2]
                            row[t]["iops_runs"] = [round(x["iops"]) for x in runs[t]]
                        rows.append(row)
                        _print_row(row, tools)
        for v in [shared] + writes:
            volumes.delete(v, who=who)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    _print_verdict(rows)
    return 0


def _print_row(row: dict, tools) -> None:
    cells = "  ".join(f"{t} {row[t]['iops']:8.0f} IOPS ({row[t]['client_cores']:.2f}c, osd {row[t]['osd_cores']:.2f}c)"
                      for t in tools)
    ratios = ""
    if "gpuio" in row and "fio" in row:
        ratios += f"  gpuio/fio {row['gpuio']['iops'] / max(row['fio']['iops'], 1e-9):.2f}"
    if "gpuio" in row and "basic" in row:
        ratios += f"  gpuio/basic {row['gpuio']['iops'] / max(row['basic']['iops'], 1e-9):.2f}"
    if "fio" in row and "basic" in row:  # what the best CPU tool gets over Basic at the same depth: the box's bound
        ratios += f"  fio/basic {row['fio']['iops'] / max(row['basic']['iops'], 1e-9):.2f}"
    if BASELINE in row:
        for t in ("fio", "basic"):
            if t in row:
                ratios += f"  base/{t} {row[BASELINE]['iops'] / max(row[t]['iops'], 1e-9):.2f}"
        if "gpuio" in row:
            ratios += f"  gpuio/base {row['gpuio']['iops'] / max(row[BASELINE]['iops'], 1e-9):.2f}"
    print(f"{row['op']:5s} {row['bs'] // 1024:3d}K {row['pattern']:4s} {row['clients']:2d} clients "
          f"(load {row.get('load', 0):.1f})  {cells}{ratios}",
          flush=True)


def _print_verdict(rows) -> None:
    def find(op, bs, pattern, n):
        return next((r for r in rows if (r["op"], r["bs"], r["pattern"], r["clients"]) == (op, bs, pattern, n)), None)

    checks = []
    for n in sorted({r["clients"] for r in rows}):
        r = find("read", 4096, "rand", n)
        if r and "gpuio" in r and "fio" in r:
            checks.append((f"4K rand read, {n} clients: gpuio/fio", r["gpuio"]["iops"] / r["fio"]["iops"], 0.9))
    r = find("read", 4096, "rand", 1)
    if r and "gpuio" in r and "basic" in r:
        checks.append(("4K rand read, 1 client: gpuio/basic", r["gpuio"]["iops"] / r["basic"]["iops"], 3.0))
        if "fio" in r:  # the same bar for fio, the best CPU tool at the same depth: where it fails too, the cluster bounds it
            checks.append(("4K rand read, 1 client: fio/basic", r["fio"]["iops"] / r["basic"]["iops"], 3.0))
    r = find("read", 65536, "seq", 1)
    if r and "gpuio" in r and "fio" in r:
        checks.append(("64K seq read, 1 client: gpuio/fio", r["gpuio"]["iops"] / r["fio"]["iops"], 0.9))
    for name, ratio, bar in checks:
        print(f"{name:42s} {ratio:5.2f}  (bar {bar:g}: {'met' if ratio >= bar else 'NOT met'})")


if __name__ == "__main__":
    sys.exit(main())
