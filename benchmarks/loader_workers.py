"""PyTorch DataLoader workers over a table larger than memory: gpuio vs np.memmap in the same workers, and the
demo with its sampling in worker processes.

    python benchmarks/loader_workers.py [--memory-mib 256] [--workers 0,1,2,4] [--methods fork,spawn,forkserver]
    python benchmarks/loader_workers.py --tiny          # CI smoke: seconds, numbers meaningless

Loader part. A float32 table of `--table-ratio` (4) x `--memory-mib` is written (before the cgroup), then the
run enters a memory cgroup (gpuio_apps.bench.memlimit: v2 or v1; root) and, for 0 workers and for 1, 2, 4 workers
under each start method, a torch DataLoader (persistent workers, batch_size=None) yields batches of
`--batch-rows` random rows, read in whichever process runs the Dataset: by gpuio (a TensorFile opened in the
main process: forked children inherit it, spawned ones receive it pickled; each process reads on its own
engine, O_DIRECT) or by np.memmap opened in the process that reads, advised MADV_RANDOM ("memmap": the kinder
mmap baseline out of core). Both read the same row ids (fresh ones every pass, so earlier passes' pages rarely
help); every row is checked. Per configuration the workers are started and warmed up unlimited, then the cgroup's
limit is set to the group's anonymous memory (main + workers) + `--memory-mib` + headroom, so the page cache the
workers and the main process share holds at most a quarter of the table. Passes are interleaved (gpuio,
memmap, then memmap, gpuio, ...), each up to `--batches` batches or `--pass-s` seconds
(timed from the first batch asked: what the previous pass left queued is drained before); the 0-worker
baseline is measured first and again last. Printed: rows/s (median, spread) of each, which processes read
from the device (/proc/PID/io read_bytes), CPU cores busy, and the ratios judged:
  - gpuio with N workers / gpuio with 0 workers (bar >= 0.9 where the disk is the bound: the "disk" column is
    gpuio's rows/s over the raw device's best 4 KiB random-read rate measured on the same file);
  - gpuio / memmap with the same workers (bar >= 3 out of core), with the share of the raw device the mapping
    reached (which bounds the ratio a disk-bound reader could reach);
  - gpuio / np.memmap as users open it (no advice: a fault reads ahead), measured last in a short probe of its
    own at 0 workers and at the most workers of the first start method (batches 64 x smaller: out of core it
    runs orders of magnitude slower), against gpuio's rate of the same configuration.
Demo part: `gpuio demo` (CPU or GPU defaults, or tiny) with --sample-workers 2 and 0 in turn, its headline
(mmap / gpuio s/epoch) and the epoch times side by side.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time

import torch

from gpuio_apps.bench.loader_workers import (PLAIN, SOURCES, RowBatches, io_by, make_loader, run_pass,
                                             write_table)
from gpuio_apps.bench.measure import raw_best
from gpuio_apps.bench.memlimit import MemoryLimit
from gpuio.loader import Keys, stop_workers

HEADROOM_BYTES = 64 << 20  # the group's anonymous memory grows a little while passes run
HEADROOM_PER_WORKER_BYTES = 32 << 20


def evict(path: str) -> None:
    """This file's cached pages out of the page cache (not the whole machine's: the box is shared). Pages a
    worker still maps stay: the cgroup bounds them."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def raw_device(path: str, tiny: bool) -> tuple[float, str]:
    """The raw device's best 4 KiB random-read rate on `path` over the reference grid (O_DIRECT), and its config."""
    ref, cfg = raw_best(path, 4096, sequential=False, write=False, seconds=0.05 if tiny else 0.5)
    return (ref["requests"] / ref["seconds"] if ref else 0.0), cfg


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memory-mib", type=int, default=256, help="page cache given to the loaders (MiB)")
    p.add_argument("--table-ratio", type=float, default=4.0, help="table size / memory given (>= 4)")
    p.add_argument("--cols", type=int, default=128, help="float32 columns a row (128: 512 B rows)")
    p.add_argument("--batch-rows", type=int, default=512)
    p.add_argument("--batches", type=int, default=64, help="batches a pass at most")
    p.add_argument("--pass-s", type=float, default=2.0, help="seconds a pass at most")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", default="0,1,2,4")
    p.add_argument("--methods", default="fork,spawn,forkserver")
    p.add_argument("--parts", default="loader,demo", help="loader and/or demo")
    p.add_argument("--demo-size", default="default", help="default (the demo's CPU or GPU defaults) or tiny")
    p.add_argument("--workdir", default=".")
    p.add_argument("--json", default="loader_workers.json")
    p.add_argument("--tiny", action="store_true", help="CI smoke: seconds; the numbers mean nothing")
    a = p.parse_args(argv)
    if a.tiny:
        a.memory_mib, a.batch_rows, a.batches, a.pass_s, a.repeats = 4, 64, 6, 0.5, 1
        a.workers, a.methods, a.demo_size = "0,2", "fork", "tiny"
    workers = [int(w) for w in a.workers.split(",") if w]
    methods = [m for m in a.methods.split(",") if m]
    parts = [x for x in a.parts.split(",") if x]
    bad = ([f"--workers {w}" for w in workers if w < 0] + [f"--methods {m!r}" for m in methods
                                                           if m not in ("fork", "spawn", "forkserver")]
           + [f"--parts {x!r}" for x in parts if x not in ("loader", "demo")])
    if a.memory_mib < 1 or a.table_ratio < 1 or a.cols < 1 or a.batch_rows < 1 or a.batches < 1 or a.repeats < 1:
        bad.append("--memory-mib, --table-ratio, --cols, --batch-rows, --batches and --repeats must be >= 1")
    if a.demo_size not in ("default", "tiny"):
        bad.append(f"--demo-size {a.demo_size!r} (default or tiny)")
    if bad:
        p.error("; ".join(bad))
    a.workers, a.methods, a.parts = workers, methods, parts
    return a


def loader_part(a) -> dict:
    budget = a.memory_mib << 20
    rows = int(budget * a.table_ratio) // (a.cols * 4)
    path = os.path.join(a.workdir, "gpuio-loader-workers.npy")
    t0 = time.perf_counter()
    table = write_table(path, rows, a.cols)  # before the cgroup: dirty pages of the write stay outside it
    print(f"table: {path}, {rows:,} rows x {a.cols} float32 = {table.nbytes / 2**20:.0f} MiB "
          f"(written in {time.perf_counter() - t0:.1f} s); memory given {a.memory_mib} MiB "
          f"({table.nbytes / budget:.1f} x smaller than the table)", flush=True)
    evict(path)
    lim = MemoryLimit.enter("gpuio-loader-workers")
    regime = (f"cgroup v{lim.version} memory limit per configuration = the group's anonymous memory (main + "
              f"workers, after a warm-up) + {a.memory_mib} MiB + headroom" if lim
              else f"NO memory limit ({MemoryLimit.why}): the file is evicted before each pass only")
    ref_iops, ref_cfg = raw_device(path, a.tiny)
    print(f"raw device, 4 KiB random reads on the table's file, best of the reference grid: {ref_iops:,.0f}/s "
          f"({ref_cfg}); cache regime: {regime}", flush=True)
    ds = RowBatches(table, a.batch_rows, seed=1)
    configs = [(0, None)] + [(n, m) for m in a.methods for n in a.workers if n > 0] + [(0, None)]
    samples: dict = {}
    detail: dict = {}
    shutdown_errors: list = []
    pass_no = 0
    try:
        for n, method in configs:
            worker_pids: set = set()
            with configuration(ds, n, method, lim, shutdown_errors) as (loader, keys):
                for source in SOURCES:  # warm-up: workers started, imports done, engines running
                    run_pass(loader, keys, source, -1 - pass_no, max(2, 2 * n), 60.0, a.cols, worker_pids)
                limit(lim, budget, n)
                for rep in range(a.repeats):
                    for source in (SOURCES if rep % 2 == 0 else SOURCES[::-1]):
                        evict(path)
                        pass_no += 1
                        r = run_pass(loader, keys, source, pass_no, a.batches, a.pass_s, a.cols, worker_pids)
                        if lim is not None:
                            r["cgroup_cache_bytes"] = lim.cache_bytes()
                        key = (n, method or "-", source)
                        samples.setdefault(key, []).append(r["rows_s"])
                        detail.setdefault(key, []).append(r)
                print(f"  {n} workers {method or '':10s} " + ", ".join(
                    f"{s} {statistics.median(samples[(n, method or '-', s)]):,.0f} rows/s" for s in SOURCES),
                    flush=True)
        plain = plain_probe(a, ds, path, lim, budget, pass_no, shutdown_errors)
    finally:
        if lim is not None:
            lim.leave()
        table.close()
    again, again_cfg = raw_device(path, a.tiny)  # a shared machine's disk drifts: the better of before and after
    print(f"raw device again, after the passes: {again:,.0f}/s ({again_cfg})", flush=True)
    if again > ref_iops:
        ref_iops, ref_cfg = again, again_cfg
    out = report(a, samples, detail, ref_iops, ref_cfg, regime, rows, plain)
    out["shutdown_errors"] = shutdown_errors
    for e in shutdown_errors:
        print(f"NOTE: a worker died when its loader stopped ({e})")
    return out


@contextlib.contextmanager
def configuration(ds: RowBatches, n: int, method: str | None, lim, shutdown_errors: list, label: str = ""):
    """A DataLoader of n workers started by `method` over ds, made while the cgroup has no limit (the caller warms
    it up, then sets one: limit()); its workers stopped on the way out, where a worker that dies then is said and
    recorded (the passes measured stand). Yields (loader, keys)."""
    if lim is not None:
        lim.unset()
    keys = Keys()
    loader = make_loader(ds, keys, n, method)
    try:
        yield loader, keys
    finally:
        try:
            stop_workers(loader)
        except RuntimeError as e:
            shutdown_errors.append(f"{n} workers {method}{label}: {e}")
            print(f"  {n} workers {method}{label}: at shutdown: {e}", flush=True)


def limit(lim, budget: int, n: int) -> None:
    """The cgroup's limit for a warmed-up configuration of n workers: the group's anonymous memory (main + workers)
    + the memory given + headroom, so the page cache holds at most the memory given."""
    if lim is not None:
        lim.set(lim.anon_bytes() + budget + HEADROOM_BYTES + n * HEADROOM_PER_WORKER_BYTES)


def plain_probe(a, ds: RowBatches, path: str, lim, budget: int, pass_no: int, shutdown_errors: list) -> dict:
    """np.memmap as users open it, after the sweep (its readahead fills the cgroup with pages read for nothing: it
    must not run between the sweep's passes): one pass at 0 workers and one at the most workers of the first start
    method. Returns {(n, method): pass}."""
    out = {}
    most = max(a.workers)
    for n, method in [(0, None)] + ([(most, a.methods[0])] if most and a.methods else []):
        with configuration(ds, n, method, lim, shutdown_errors, f" ({PLAIN})") as (loader, keys):
            run_pass(loader, keys, PLAIN, -10_000 - n, max(1, n), 120.0, a.cols, set())  # workers up, mapping open
            limit(lim, budget, n)
            evict(path)
            r = run_pass(loader, keys, PLAIN, pass_no + 1 + n, a.batches, a.pass_s, a.cols, set())
            out[(n, method or "-")] = r
            print(f"  {n} workers {method or '':10s} {PLAIN} {r['rows_s']:,.0f} rows/s (batches of "
                  f"{ds.rows_of(PLAIN)} rows)", flush=True)
    return out


def report(a, samples: dict, detail: dict, ref_iops: float, ref_cfg: str, regime: str, rows: int,
           plain: dict) -> dict:
    med = {k: statistics.median(v) for k, v in samples.items()}
    spread = {k: (min(v), max(v)) for k, v in samples.items()}
    base = med[(0, "-", "gpuio")]
    lines, judged = [], dict(vs_zero=[], vs_memmap=[])
    head = (f"{'workers':>7} {'start':>10} {'gpuio rows/s':>22} {'memmap rows/s':>22} {'gpuio/memmap':>12} "
            f"{'gpuio N/0':>9} {'disk':>5} {'cores g/m':>9}  I/O by (gpuio | memmap)")
    for (n, method, source) in [k for k in med if k[2] == "gpuio"]:
        g, m = med[(n, method, "gpuio")], med[(n, method, "memmap")]
        dg, dm = detail[(n, method, "gpuio")][-1], detail[(n, method, "memmap")][-1]
        cores = (f"{statistics.median(d['cpu_s'] / d['seconds'] for d in detail[(n, method, 'gpuio')]):.1f}/"
                 f"{statistics.median(d['cpu_s'] / d['seconds'] for d in detail[(n, method, 'memmap')]):.1f}")
        disk = g / ref_iops if ref_iops else float("nan")
        lines.append(f"{n:>7} {method:>10} {g:>10,.0f} ({spread[(n, method, 'gpuio')][0]:,.0f}-"
                     f"{spread[(n, method, 'gpuio')][1]:,.0f}) {m:>10,.0f} ({spread[(n, method, 'memmap')][0]:,.0f}-"
                     f"{spread[(n, method, 'memmap')][1]:,.0f}) {g / m:>12.2f} {g / base:>9.2f} {disk:>5.2f} "
                     f"{cores:>9}  {io_by(dg)} | {io_by(dm)}")
        if n:
            judged["vs_zero"].append((g / base, n, method, disk))
        judged["vs_memmap"].append((g / m, n, method, m / ref_iops if ref_iops else float("nan")))
    print(f"\nDataLoader over a {a.table_ratio:g}x-larger-than-memory table ({rows:,} rows of {a.cols * 4} B, "
          f"batches of {a.batch_rows} random rows, {a.repeats} interleaved passes each; {regime}); rows/s "
          f"median (min-max); memmap = np.memmap advised MADV_RANDOM; disk = gpuio rows/s / raw 4 KiB IOPS "
          f"({ref_iops:,.0f}/s, {ref_cfg}); 0 workers measured first and last")
    print(head)
    for line in lines:
        print(line)
    out = dict(args={k: v for k, v in vars(a).items()}, ref_iops=ref_iops, ref_config=ref_cfg, regime=regime,
               median={f"{n}/{m}/{s}": v for (n, m, s), v in med.items()},
               passes={f"{n}/{m}/{s}": v for (n, m, s), v in detail.items()},
               plain={f"{n}/{m}": r for (n, m), r in plain.items()})
    ratios = {}
    if judged["vs_zero"]:
        worst = min(judged["vs_zero"])
        ratios["gpuio_workers_vs_zero_min"] = worst[0]
        print(f"judged: gpuio with N workers / with 0 workers, lowest {worst[0]:.2f} ({worst[1]} x {worst[2]}; "
              f"disk {worst[3]:.2f} of the raw device there) (bar >= 0.9 where the disk is the bound): "
              f"{'MET' if worst[0] >= 0.9 else 'NOT MET'}")
    worst = min(judged["vs_memmap"])
    ratios["gpuio_vs_memmap_min"] = worst[0]
    bound = (f"; the mapping ran at {worst[3]:.2f} of the raw device there, so a reader bound by this disk could "
             f"beat it by about {1 / worst[3]:.2f} at most" if 0 < worst[3] < 1 else "")
    print(f"judged: gpuio / np.memmap advised MADV_RANDOM in the same workers, lowest {worst[0]:.2f} ({worst[1]} "
          f"workers, {worst[2]}{bound}) (bar >= 3 out of core): {'MET' if worst[0] >= 3 else 'NOT MET'}")
    vs_plain = [(med[(n, m, "gpuio")] / r["rows_s"], n, m, r["rows_s"]) for (n, m), r in plain.items()
                if (n, m, "gpuio") in med and r["rows_s"] > 0]
    if vs_plain:
        worst = min(vs_plain)
        ratios["gpuio_vs_memmap_plain_min"] = worst[0]
        print(f"judged: gpuio / np.memmap as users open it (readahead), lowest {worst[0]:.1f} ({worst[1]} workers, "
              f"{worst[2]}: {worst[3]:,.0f} rows/s; " + ", ".join(f"{n} x {m} {g:.1f}" for g, n, m, _ in vs_plain)
              + f") (bar >= 3 out of core): {'MET' if worst[0] >= 3 else 'NOT MET'}")
    out["ratios"] = ratios
    return out


DEMO_CHILD = """
import io, json, sys
from rich.console import Console
from gpuio_apps.gnn.demo import DemoConfig, run
kw = json.loads(sys.argv[1])
results = run(DemoConfig(**kw), Console(file=io.StringIO(), width=140))
print(json.dumps({r["backend"]: r["epoch_s"] for r in results}))
"""


def demo_part(a) -> dict:
    """`gpuio demo` with --sample-workers 0, 2 (and 0 again): each run in a process of its own, as the README
    runs it; headline and epoch times side by side."""
    import subprocess
    import sys

    size = (dict(nodes=20_000, edges=120_000, features=32, batch_size=128, epochs=1, batches=4,
                 fanouts=[5, 5]) if a.demo_size == "tiny" else {})
    out = {}
    order = (0, 2) if a.tiny else (0, 2, 0)  # 0 again last: the two 0-worker runs bracket a shared machine's drift
    for workers in order:
        kw = dict(workdir=os.path.abspath(a.workdir), sample_workers=workers, **size)
        r = subprocess.run([sys.executable, "-c", DEMO_CHILD, json.dumps(kw)], capture_output=True, text=True,
                           timeout=900)
        if r.returncode:  # said, and the other runs still go (-9: killed, e.g. by its cgroup's OOM killer)
            last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
            print(f"demo, sampling in {workers} worker processes: FAILED (rc {r.returncode}): {last}", flush=True)
            out.setdefault(workers, [])
            continue
        by = json.loads(r.stdout.strip().splitlines()[-1])
        headline = by["mmap"] / by["gpuio"]
        out.setdefault(workers, []).append(dict(headline=headline, **{f"{b}_epoch_s": v for b, v in by.items()}))
        print(f"demo, sampling in {workers} worker processes: gpuio {by['gpuio']:.3f} s/epoch, mmap {by['mmap']:.3f}, "
              f"memory {by['memory']:.3f}; headline mmap/gpuio {headline:.2f} x", flush=True)
    runs = {str(k): v for k, v in out.items()}
    if not (out.get(0) and out.get(2)):
        print("demo: no ratio (a run failed)")
        return dict(runs=runs, ratios={})
    zero = statistics.median(r["gpuio_epoch_s"] for r in out[0])
    two = out[2][0]["gpuio_epoch_s"]
    print(f"demo: gpuio epoch with sampling in 2 workers / in the loader's thread: {two / zero:.2f} "
          f"(< 1: faster); headline {out[2][0]['headline']:.2f} x with 2 workers vs "
          f"{statistics.median(r['headline'] for r in out[0]):.2f} x with 0")
    return dict(runs=runs, ratios=dict(demo_epoch_2_vs_0=two / zero))


def main(argv=None) -> dict:
    a = parse_args(argv)
    torch.set_num_threads(min(torch.get_num_threads(), os.cpu_count() or 1))
    doc, ratios = {}, {}
    if "loader" in a.parts:
        doc["loader"] = loader_part(a)
        ratios.update(doc["loader"]["ratios"])
    if "demo" in a.parts:
        doc["demo"] = demo_part(a)
        ratios.update(doc["demo"]["ratios"])
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    print(f"json: {a.json}")
    return ratios


if __name__ == "__main__":
    main()
