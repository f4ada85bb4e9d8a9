"""Where one volume client's CPU goes, per 4 KiB random read: CPU time and context switches of every thread
of the client process (gpuio's caller and worker, librbd's io_context_pool, the messenger's msgr-worker-N,
fio's job thread), from /proc/<pid>/task, over a timed window. Complements volumes_bench.py (rates and ratios)
with the cost side: a client that needs fewer CPU microseconds per request leaves more of a shared box to
the OSDs.

    python benchmarks/volumes_cpu.py --conf C --volume rbd:rbd/v --tool gpuio   # or basic, fio
    python benchmarks/volumes_cpu.py --conf C --volume rbd:rbd/v --tool gpuio --baseline OLD/python  # older gpuio

The volume must exist and hold data (reads of never-written objects cost the OSDs nothing).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def threads(pid: int, main_tid: int = -1) -> dict:
    """tid -> (name, cpu seconds, voluntary, involuntary context switches) of every thread of pid."""
    out, tick = {}, os.sysconf("SC_CLK_TCK")
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            st = open(f"/proc/{pid}/task/{t}/stat").read()
            f = st.rsplit(")", 1)[1].split()
            name = "caller" if int(t) == main_tid else st[st.index("(") + 1:st.rindex(")")]
            sw = [int(x.split(":")[1]) for x in open(f"/proc/{pid}/task/{t}/status") if "ctxt_switches" in x]
            out[f"{pid}/{t}"] = (name, (int(f[11]) + int(f[12])) / tick, sw[0], sw[1])
        except (OSError, IndexError, ValueError):
            pass
    return out


def report(tool: str, before: dict, after: dict, ops: float, wall: float) -> dict:
    g = collections.defaultdict(lambda: [0.0, 0, 0])
    for t, (name, cpu, v, nv) in after.items():
        b = before.get(t, (name, 0.0, 0, 0))
        x = g["python (gpuio worker)" if name == "python" else name]
        x[0] += cpu - b[1]
        x[1] += v - b[2]
        x[2] += nv - b[3]
    rows = {k: {"us_per_op": v[0] / ops * 1e6, "vcsw_per_op": v[1] / ops, "ivcsw_per_op": v[2] / ops}
            for k, v in sorted(g.items(), key=lambda kv: -kv[1][0]) if v[0] > 0 or v[1] + v[2] > 0}
    total = sum(v[0] for v in g.values())
    print(f"{tool}: {ops / wall:.0f} IOPS, {total / ops * 1e6:.1f} us of client CPU per request "
          f"({total / wall:.2f} cores), load {os.getloadavg()[0]:.1f}")
    for k, r in rows.items():
        print(f"  {k:24s} {r['us_per_op']:7.1f} us/op  voluntary switches/op {r['vcsw_per_op']:5.2f}  "
              f"involuntary {r['ivcsw_per_op']:5.2f}")
    return {"tool": tool, "ops": ops, "seconds": wall, "iops": ops / wall, "us_per_op": total / ops * 1e6,
            "threads": rows, "load": os.getloadavg()[0]}


def run_gpuio(a) -> dict:
    from gpuio import volumes

    # queue_depth = --qd requests with librbd (fio's iodepth), refilled per completion by the engine; the
    # caller keeps --batches batches of --batch requests outstanding (as benchmarks/volumes_bench.py does)
    eng = volumes.open(a.volume, "r", who=volumes.Identity(conf=a.conf), block_size=4096, workers=1,
                       queue_depth=a.qd, io_bytes_max=4096)
    per = a.batch
    ids = np.random.default_rng(1).integers(0, eng.total_blocks, 1 << 18)
    bufs = [np.zeros(per * 4096, np.uint8) for _ in range(a.batches)]
    wait_any = getattr(eng, "wait_any", None)
    pos, ops = 0, 0

    def nxt():
        nonlocal pos
        pos = (pos + per) % (len(ids) - per)
        return ids[pos:pos + per]

    hs = [eng.read_async(nxt(), bufs[i]) for i in range(a.batches)]
    before, t0, done0 = threads(os.getpid(), os.getpid()), time.monotonic(), eng.stats()["ops"]
    # until the time is up and at least one request has completed inside the window (a stalled box still counts one)
    while time.monotonic() - t0 < a.seconds or eng.stats()["ops"] == done0:
        i = wait_any(hs) if wait_any else next((k for k in range(len(hs)) if hs[k].done()), ops // per % len(hs))
        hs[i].wait()
        ops += per
        hs[i] = eng.read_async(nxt(), bufs[i])
    # requests completed in the window, as the engine counts them (not rounded to whole batches)
    wall, after, ops = time.monotonic() - t0, threads(os.getpid(), os.getpid()), eng.stats()["ops"] - done0
    for h in hs:
        h.wait()
    r = report("gpuio" + (" (baseline)" if a.baseline else ""), before, after, ops, wall)
    s = eng.stats()
    r["caller_submitted_ops"] = s.get("caller_submitted_ops", 0)
    eng.close()
    return r


def run_basic(a) -> dict:
    from gpuio.volumes import Identity
    from gpuio_apps.basic_volume import SyncVolume

    v = SyncVolume(a.volume, who=Identity(conf=a.conf))
    ids = (np.random.default_rng(1).integers(0, v.size // 4096, 1 << 18) * 4096).tolist()
    buf = np.zeros(4096, np.uint8)
    p, read, img = buf.ctypes.data, v.rbd.rbd_read, v.image
    before, t0, ops = threads(os.getpid(), os.getpid()), time.monotonic(), 0
    while ops == 0 or time.monotonic() - t0 < a.seconds:  # one round at least, however loaded the box
        for off in ids[ops % (1 << 18):ops % (1 << 18) + 64]:
            if read(img, off, 4096, p) != 4096:
                raise OSError(5, f"basic read at {off} failed")
        ops += 64
    wall, after = time.monotonic() - t0, threads(os.getpid(), os.getpid())
    v.close()
    return report("basic", before, after, ops, wall)


def run_fio(a) -> dict:
    pool, _, image = a.volume.removeprefix("rbd:").partition("/")
    job = (f"[global]\nioengine=rbd\nclientname=admin\nthread=0\ntime_based=1\nruntime={a.seconds + 3:g}\n"
           f"bs=4096\niodepth={a.qd}\nrw=randread\ninvalidate=0\ndirect=1\n[c0]\npool={pool}\nrbdname={image}\n")
    with tempfile.NamedTemporaryFile("w", suffix=".fio", delete=False) as jf, \
            tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as cf:
        jf.write(job)
        cf.write(open(a.conf).read() + "\n[client]\nrbd cache = false\n")
    p = subprocess.Popen(["fio", "--output-format=json", jf.name], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, CEPH_CONF=cf.name))

    def sample():
        out = {}
        for pid in [p.pid] + [int(x) for x in open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()]:
            out.update(threads(pid))
        return out

    time.sleep(1.5)  # connected and running
    before, t0 = sample(), time.monotonic()
    time.sleep(a.seconds)
    after, wall = sample(), time.monotonic() - t0
    iops = json.loads(p.communicate()[0])["jobs"][0]["read"]["iops"]
    os.unlink(jf.name)
    os.unlink(cf.name)
    return report("fio", before, after, iops * wall, wall)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conf", required=True, help="ceph.conf of the cluster")
    ap.add_argument("--volume", required=True, help="rbd:POOL/IMAGE holding data")
    ap.add_argument("--tool", choices=("gpuio", "basic", "fio"), default="gpuio")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--qd", type=int, default=32, help="requests in flight (gpuio, fio)")
    ap.add_argument("--batches", type=int, default=2, help="gpuio: batches outstanding")
    ap.add_argument("--batch", type=int, default=128, help="gpuio: requests per batch (--qd of them with librbd)")
    ap.add_argument("--baseline", default="", help="run gpuio from this directory (an older checkout's python/)")
    ap.add_argument("--json", default="", help="append the result as one JSON line to this file")
    a = ap.parse_args()
    if a.baseline and not os.environ.get("_GPUIO_CPU_CHILD"):  # re-run with the baseline first on the path
        env = dict(os.environ, _GPUIO_CPU_CHILD="1", PYTHONPATH=os.pathsep.join(
            p for p in (os.path.abspath(a.baseline), os.environ.get("PYTHONPATH")) if p))
        return subprocess.call([sys.executable, __file__] + sys.argv[1:], env=env)
    r = {"gpuio": run_gpuio, "basic": run_basic, "fio": run_fio}[a.tool](a)
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
