"""The applications' read path alone, beside pread, on one file (GEMM tiles once read at 0.65x of pread).

    python3 benchmarks/apps_io_path.py --mib 1024 --cold                 # host memory (any machine)
    python3 benchmarks/apps_io_path.py --mib 4096 --cold --device cuda   # + the GPU paths (GPU machine)

Reads the file in panels of --panel-mib (GEMM large: 128 MiB) with the page cache dropped before each pass,
and prints per pass the rate, the bytes the disk served (/sys/dev/block sector counters) and what the engine
issued. Passes:
  pread x R        the pread baseline's pattern before the GEMM fix: every panel read R times (R = --reread);
                   the disk serves each panel once, the page cache the rest (logical rate above the disk's);
  engine panel     one engine batch per panel into host memory (the apps on the CPU: O_DIRECT in place);
  engine 1 chunk   the panel cut into bounce-slot chunks (--chunk-mib, 4 by default), one in flight: what a
                   stream-ordered read with block ids on the GPU does (one publish per chunk per stream);
  engine N chunks  the same chunks, up to --slots in flight: a stream-ordered read with host ids;
  cuda ids=...     (--device cuda) gpuio_apps.papers.store.Store reads into GPU memory, ids on the device / host;
  pread+copy       (--device cuda) the apps' baseline: pread into pinned memory, then cudaMemcpy.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time

import numpy as np

MiB = 1 << 20


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="apps_io_path", description=__doc__.split("\n")[0])
    ap.add_argument("--file", default="gpuio-apps-io-path.bin")
    ap.add_argument("--mib", type=int, default=256, help="file size in MiB")
    ap.add_argument("--panel-mib", type=int, default=128)
    ap.add_argument("--chunk-mib", type=int, default=4, help="bounce slot (gpuio.gpu bounce_bytes / 16)")
    ap.add_argument("--slots", type=int, default=16, help="bounce slots in flight for host ids")
    ap.add_argument("--reread", type=int, default=4, help="times the pread pass reads each panel")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda to add the GPU paths")
    ap.add_argument("--cold", action="store_true", help="drop the page cache before each pass (root)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args(argv)
    for name in ("mib", "panel_mib", "chunk_mib", "slots", "reread"):
        if getattr(a, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')}={getattr(a, name)} must be >= 1")
    if a.mib % a.panel_mib or a.panel_mib % a.chunk_mib:
        raise SystemExit(f"--panel-mib={a.panel_mib} must divide --mib={a.mib} and be a multiple of "
                         f"--chunk-mib={a.chunk_mib}")

    import torch

    from gpuio_apps.papers.iodiag import disk_sectors
    from gpuio_apps.papers.store import PosixStore, Store
    from gpuio_apps.papers.pipeline import drop_caches
    from gpuio.engine import aligned_empty

    nbytes, panel = a.mib * MiB, a.panel_mib * MiB
    cuda = a.device.startswith("cuda")
    g = Store(a.file, nbytes, cuda_ids="host")
    p = PosixStore(a.file, nbytes)
    ext = g.alloc("x", nbytes)
    p.extents["x"] = ext
    fill = torch.arange(panel // 8, dtype=torch.int64).view(torch.uint8)
    for off in range(0, nbytes, panel):
        g.write(ext, off, fill)
    g.sync()
    bs = g.block_size
    host = torch.from_numpy(aligned_empty(panel))
    rows = []

    def measure(name, fn, logical):
        failure = drop_caches(a.cold)
        before, ops0 = disk_sectors(a.file), g.engine.stats()["ops"]
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        s = time.perf_counter() - t0
        after, ops = disk_sectors(a.file), g.engine.stats()["ops"] - ops0
        disk = (after[0] - before[0]) * 512 if before and after else None
        r = dict(path=name, seconds=s, logical_bytes=logical, GBps=logical / s / 1e9, disk_bytes=disk,
                 disk_GBps=disk / s / 1e9 if disk else None, engine_requests=ops, cold=a.cold and failure is None)
        rows.append(r)
        print(f"{name:<28} {s:7.3f} s  {r['GBps']:6.2f} GB/s asked" + (
            f"  disk {disk / MiB:7.0f} MiB at {r['disk_GBps']:5.2f} GB/s" if disk else "") +
              (f"  engine requests {ops} x {logical / ops / MiB:.2f} MiB" if ops else "")
              + ("" if r["cold"] else "  (page cache kept)"), flush=True)

    def pread_reread():
        for off in range(0, nbytes, panel):
            for _ in range(a.reread):
                p.read(ext, off, host)

    def engine_panel():
        for off in range(0, nbytes, panel):
            g.read(ext, off, host)

    first = ext.first_block
    chunk_blocks = a.chunk_mib * MiB // bs

    def engine_chunks(depth):
        def go():
            inflight = collections.deque()
            for b in range(0, nbytes // bs, chunk_blocks):
                if len(inflight) >= depth:
                    inflight.popleft().wait()
                at = (b * bs) % panel
                ids = np.arange(first + b, first + b + chunk_blocks, dtype=np.int64)
                inflight.append(g.engine.read_async(ids, host[at:at + chunk_blocks * bs]))
            for h in inflight:
                h.wait()
        return go

    measure(f"pread x {a.reread}", pread_reread, nbytes * a.reread)
    measure("engine panel (host)", engine_panel, nbytes)
    measure(f"engine {a.chunk_mib} MiB chunks, 1", engine_chunks(1), nbytes)
    measure(f"engine {a.chunk_mib} MiB chunks, {a.slots}", engine_chunks(a.slots), nbytes)
    if cuda:
        dev = torch.device(a.device)
        out = torch.empty(panel, dtype=torch.uint8, device=dev)

        def cuda_read(store):
            def go():
                for off in range(0, nbytes, panel):
                    store.read(ext, off, out)
            return go

        measure("cuda ids=host", cuda_read(g), nbytes)
        g.cuda_ids = "device"
        measure("cuda ids=device", cuda_read(g), nbytes)
        g.cuda_ids = "host"
        measure("pread+copy (cuda)", cuda_read(p), nbytes)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "rows": rows}, f, indent=1)
    g.close()
    p.close()
    if not a.keep:
        os.unlink(a.file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
