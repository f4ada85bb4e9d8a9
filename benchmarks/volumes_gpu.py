"""gpuio's rbd backend into GPU memory (the GPU-machine run of `scripts/gpu.sh ceph`): one volume
of a running cluster read by one client, 4 KiB random and 64 KiB sequential, into pinned host memory and
into GPU memory, beside "Basic" (one synchronous librbd read per request, then a copy to the destination:
memcpy, or cudaMemcpy for the GPU) and `rbd bench` (the CPU tool that ships with Ceph; fio is not there).

    python benchmarks/volumes_gpu.py --conf C [--mib 1024] [--seconds 3] [--rbd-bench] [--json F]

gpuio keeps --qd requests in flight as --batches batches (like volumes_bench.py); the GPU destination goes
through the engine's stream path (staging slot -> copy engine), and each GPU cell first checks that the
bytes that landed on the GPU equal a host read of the same blocks. Prints one table with ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from volumes_bench import _librbd, _offsets  # noqa: E402

CELLS = [(4096, "rand"), (65536, "seq")]


def _cuda():
    try:
        import torch
        return torch if torch.cuda.is_available() else None
    except ImportError:
        return None


def run_gpuio(vol: str, who, bs: int, pattern: str, dest: str, a) -> dict:
    from gpuio import volumes

    nb = a.batches
    per = max(1, a.qd // nb)
    eng = volumes.open(vol, "r", who=who, block_size=bs, workers=2, queue_depth=max(a.qd, 4), io_bytes_max=bs)
    n_req = eng.total_blocks
    rng = np.random.default_rng(1)
    if dest == "gpu":
        torch = _cuda()
        bufs = [torch.empty((per, bs), dtype=torch.uint8, device="cuda") for _ in range(nb)]
        ids = rng.integers(0, n_req, per)
        host = np.empty((per, bs), np.uint8)
        eng.read(ids, host)
        eng.read(ids, bufs[0])
        torch.cuda.synchronize()
        if not np.array_equal(bufs[0].cpu().numpy(), host):
            raise RuntimeError(f"{vol}: the bytes read into GPU memory differ from a host read of blocks {ids[:4]}...")
    else:
        bufs = [np.empty((per, bs), np.uint8) for _ in range(nb)]
    pos, ops = int(rng.integers(0, n_req)), 0
    inflight = []
    t0 = time.monotonic()
    t_end = t0 + a.seconds
    for i in range(nb):
        inflight.append(eng.read_async(_offsets(rng, pattern, n_req, per, pos), bufs[i]))
        pos += per
    i = 0
    while True:
        inflight[i].wait()
        ops += per
        if time.monotonic() >= t_end:
            break
        inflight[i] = eng.read_async(_offsets(rng, pattern, n_req, per, pos), bufs[i])
        pos += per
        i = (i + 1) % nb
    for h in inflight:
        h.wait()
    wall = time.monotonic() - t0
    path = eng.stats().get("data_path", "")
    eng.close()
    return {"iops": ops / wall, "data_path": path}


def run_basic(conf: str, vol: str, bs: int, pattern: str, dest: str, seconds: float) -> dict:
    lib = _librbd(conf, vol, False)
    n_req = lib.size // bs
    rng = np.random.default_rng(2)
    bounce = np.zeros(bs, np.uint8)
    if dest == "gpu":
        torch = _cuda()
        src = torch.from_numpy(bounce)
        dst = torch.empty((64, bs), dtype=torch.uint8, device="cuda")
        copy = lambda k: dst[k].copy_(src)  # noqa: E731  (cudaMemcpy, synchronous from pageable memory)
    else:
        dst = np.empty((64, bs), np.uint8)
        copy = lambda k: dst.__setitem__(k, bounce)  # noqa: E731
    pos, ops = int(rng.integers(0, n_req)), 0
    t0 = time.monotonic()
    while ops == 0 or time.monotonic() < t0 + seconds:  # one round at least, however loaded the box
        for k, off in enumerate(_offsets(rng, pattern, n_req, 64, pos)):
            rc = lib.rbd.rbd_read(lib.image, int(off) * bs, bs, bounce.ctypes.data)
            if rc != bs:
                raise OSError(-rc if rc < 0 else 5, f"basic read of {vol} at {off * bs}: {rc}")
            copy(k)
            ops += 1
        pos += 64
    wall = time.monotonic() - t0
    lib.close()
    return {"iops": ops / wall}


def run_rbd_bench(conf: str, vol: str, bs: int, pattern: str, qd: int, mib: int, seconds: float) -> dict:
    image = vol.removeprefix("rbd:")
    total = max(bs * 1000, min(mib << 20, int(seconds * (30000 if bs <= 4096 else 4000)) * bs))
    cmd = ["rbd", "-c", conf, "bench", "--io-type", "read", "--io-size", str(bs), "--io-threads", str(qd),
           "--io-pattern", pattern, "--io-total", str(total), image]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 20 + 60)
    m = re.search(r"elapsed:\s*([\d.]+)\s+ops:\s*(\d+)\s+ops/sec:\s*([\d.]+)", r.stdout)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {(r.stderr or r.stdout)[-800:]}")
    return {"iops": float(m.group(3))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conf", required=True, help="ceph.conf of a running cluster (gpuio cluster up)")
    ap.add_argument("--mib", type=int, default=1024, help="volume size")
    ap.add_argument("--seconds", type=float, default=3.0, help="per cell")
    ap.add_argument("--qd", type=int, default=32, help="gpuio and rbd bench: requests in flight")
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--rbd-bench", action="store_true", help="also run `rbd bench` (the rbd CLI must load)")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    from gpuio import volumes

    who = volumes.Identity(conf=a.conf)
    vol = volumes.create(f"rbd/gpubench{os.getpid()}", a.mib << 20, who=who)
    rows = []
    try:
        t0 = time.monotonic()
        with volumes.open(vol, "r+", who=who, block_size=65536) as eng:  # reads hit written objects
            buf = np.random.default_rng(0).integers(0, 256, 64 * 65536, dtype=np.uint8)
            for s in range(0, eng.total_blocks, 64):
                k = min(64, eng.total_blocks - s)
                eng.write(np.arange(s, s + k), buf[:k * 65536])
        print(f"volume {vol}: {a.mib} MiB written in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        dests = ["host"] + (["gpu"] if _cuda() else [])
        for bs, pattern in CELLS:
            row = {"bs": bs, "pattern": pattern}
            for d in dests:
                row[f"gpuio_{d}"] = run_gpuio(vol, who, bs, pattern, d, a)
                row[f"basic_{d}"] = run_basic(a.conf, vol, bs, pattern, d, a.seconds)
            if a.rbd_bench:
                row["rbd_bench"] = run_rbd_bench(a.conf, vol, bs, pattern, a.qd, a.mib, a.seconds)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        volumes.delete(vol, who=who)
    if "gpu" not in dests:
        print("no CUDA device: the GPU-memory cells were not run")
    print("| workload | dest | gpuio IOPS | Basic IOPS | rbd bench IOPS | gpuio/Basic | gpuio/rbd bench | gpuio data path |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        for d in dests:
            g, b, rb = r[f"gpuio_{d}"]["iops"], r[f"basic_{d}"]["iops"], r.get("rbd_bench", {}).get("iops")
            print(f"| {r['bs'] // 1024} KiB {r['pattern']} read | {d} | {g:.0f} | {b:.0f} | "
                  f"{f'{rb:.0f}' if rb else '-'} | {g / b:.2f} | {f'{g / rb:.2f}' if rb else '-'} | "
                  f"{r[f'gpuio_{d}']['data_path']} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
