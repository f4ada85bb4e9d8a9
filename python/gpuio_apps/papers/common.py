"""What every application's command line shares: --size, --store, --device, --cold, and the store pair."""
from __future__ import annotations

import argparse
import contextlib
import os
from typing import Any

from gpuio import outputs

from .store import PosixStore, Store, paths_of, same_layout

SIZES = ("tiny", "small", "medium", "large")


def default_store(app: str) -> str:
    return os.path.abspath(f"gpuio-apps-{app}.bin")


def parser(app: str, doc: str, sizes: dict) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=app, description=doc.split("\n")[0])
    ap.add_argument("--size", default="tiny", choices=list(sizes),
                    help="; ".join(f"{k}: {v}" for k, v in sizes.items()))
    ap.add_argument("--store", default=None,
                    help="a file, or comma-separated files (RAID-0), or Ceph volumes rbd:POOL/IMAGE (CEPH_CONF), that hold the data "
                         f"(default: {os.path.basename(default_store(app))} in the current directory)")
    ap.add_argument("--device", default="auto", help="cpu, cuda, or auto (cuda when torch sees one)")
    ap.add_argument("--cold", action="store_true", help="sync + drop the page cache before each timed pass (root)")
    ap.add_argument("--workers", type=int, default=None, help="gpuio engine worker threads (default: engine's)")
    ap.add_argument("--keep", action="store_true", help="keep the store files afterwards")
    return ap


def size_params(sizes: dict, size: str) -> dict:
    if size not in sizes:
        raise ValueError(f"size={size!r} is not one of {', '.join(sizes)}")
    return dict(sizes[size])


# Engine staging when the app computes on CUDA (the sizing of examples/cam_pipeline.py). The apps' timed
# reads and writes of CUDA memory do not use it: they are stream-ordered requests, which move through the
# GPU layer's bounce pool (gpuio.gpu DEFAULTS["bounce_bytes"], 16 slots; each slot's chunk is read by O_DIRECT
# in 1 MiB device requests, io_bytes_max) and then by one copy per chunk on the stream. The staging pool
# serves what is neither: unaligned host buffers (prepare, verify) and the device API. Host destinations
# are read by O_DIRECT in place. The I/O diagnostic line of each pass (gpuio_apps.papers.iodiag) shows the split.
CUDA_STAGING = {"staging_bytes": 256 << 20, "staging_slot_bytes": 1 << 20}


def engine_options_for(device) -> dict:
    return dict(CUDA_STAGING) if str(device).startswith("cuda") else {}


def open_pair(store: Any, capacity_bytes: int, workers: int | None = None, engine_options: dict | None = None,
              device=None) -> tuple[Store, PosixStore]:
    """The gpuio store and the pread/pwrite baseline over the same files (extents are allocated alike).
    device: where the app computes (CUDA gets engine_options_for's staging unless engine_options say)."""
    opts = dict(engine_options_for(device), **(engine_options or {}))
    g = Store(store, capacity_bytes, workers=workers, **opts)
    return g, PosixStore(store, capacity_bytes)


@contextlib.contextmanager
def opened_pair(store: Any, capacity_bytes: int, workers: int | None = None, device=None, keep: bool = False):
    """open_pair for the length of a run: both stores closed at the end, the files removed unless `keep`."""
    g, p = open_pair(store, capacity_bytes, workers, device=device)
    try:
        yield g, p
    finally:
        g.close()
        p.close()
        if not keep:
            remove(store)
            if g.created:
                from gpuio.volumes import delete
                for v in g.created:
                    delete(v)


@contextlib.contextmanager
def extra_baseline(cls, g: Store, names: str, app: str):
    """One more baseline store of class `cls` (e.g. kvikio_store.KvikioStore) over g's files with g's extents
    `names`, for measure_steps(others=): yields ([store], {}), closed afterwards; where it cannot open (its
    library missing or unusable, volumes), one printed line and ([], {"<kind>_skipped": why})."""
    try:
        if g.volume:
            raise ValueError("the store is on volumes, not files")
        st = cls(g.paths, g.capacity_blocks * g.block_size, block_size=g.block_size, stripe_bytes=g.stripe_bytes)
    except (ImportError, ValueError) as e:
        print(f"{app}: {cls.kind} baseline skipped: {e}", flush=True)
        yield [], {f"{cls.kind}_skipped": str(e)}
        return
    try:
        same_layout(g, st, names)
        yield [st], {}
    finally:
        st.close()


def remove(store: Any) -> None:
    """Remove the store's files (volumes: opened_pair deletes those its run created)."""
    for p in paths_of(store):
        if p.startswith("rbd:"):
            continue
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def alloc_both(g, p, name: str, nbytes: int):
    """Allocate the same extent on both stores (both bump-allocate from block 0, so they stay equal)."""
    e = g.alloc(name, nbytes)
    if p.alloc(name, nbytes) != e:
        raise AssertionError(f"extent {name!r} differs between the two stores")
    return e


def print_row(r: dict) -> None:
    print(f"{r['app']} {r['size']} [{r['regime']}] data_path={r['data_path']}: gpuio {r['gpuio_s']:.3f} s, "
          f"{r['baseline']} {r['baseline_s']:.3f} s (speedup {r['speedup']:.2f}x)"
          + (f", kvikio {r['kvikio_s']:.3f} s (speedup {r['speedup_kvikio']:.2f}x)" if "kvikio_s" in r else "")
          + f"; I/O alone {r['io_s']:.3f} s, "
          f"compute alone {r['compute_s']:.3f} s, ideal {r['ideal_s']:.3f} s (gpuio/ideal {r['of_ideal']:.2f}); "
          f"check: {r['check']}", flush=True)


def raw_seconds_for(size: str) -> float:
    """Seconds per configuration of the raw reference grid (RAW_GRID: 8 configurations, read and write each)."""
    return 0.05 if size == "tiny" else 1.0


def raw_rates(path: str, seconds: float) -> dict:
    """The raw device's best sequential 1 MiB read and write rates on `path` (bytes/s), O_DIRECT. Empty for
    a volume (no raw device on this side)."""
    from ..bench.measure import raw_best

    if path.startswith("rbd:"):
        return {}
    out = {}
    for write in (False, True):
        r, label = raw_best(path, 1 << 20, sequential=True, write=write, seconds=seconds)
        if r:
            out["raw_write_Bps" if write else "raw_read_Bps"] = r["bytes"] / r["seconds"]
            out["raw_write_cfg" if write else "raw_read_cfg"] = label
    return out


RAW_FILE = {"request_bytes": 1 << 20, "read_queue_depth": 128, "write_queue_depth": 32}  # raw_file_pass's configuration


def raw_whole_pass(path: str, nbytes: int, *, write: bool = False, request_bytes: int = RAW_FILE["request_bytes"],
                   threads: int = 1, queue_depth: int = 0, uring: bool = True) -> dict:
    """The raw device moving the first nbytes of `path` once (O_DIRECT, sequential, each of `threads` threads
    its contiguous share of whole requests, front to back): raw_bench's record (ops, bytes, seconds, cpu_seconds).
    queue_depth 0: RAW_FILE's for reads or writes."""
    from ..bench.measure import raw_bench

    qd = queue_depth or RAW_FILE["write_queue_depth" if write else "read_queue_depth"]
    return raw_bench(path, block_bytes=request_bytes, queue_depth=qd, threads=threads, seconds=3600.0, uring=uring,
                     sequential=True, write=write, direct=True, ops_max=nbytes // request_bytes // threads)


def raw_file_pass(path: str, nbytes: int, write: bool = False) -> float:
    """The raw device reading, or writing, the first nbytes of the existing file `path` once, front to back
    (O_DIRECT, 1 MiB requests, one thread at QD 128 reading, QD 32 writing; a write timed to fdatasync), in
    bytes/s: a reference on the very blocks a load reads or a re-save writes (raw_first_write: a new file's),
    the same bytes, sustained. raw_rates' 1 s samples are not: on the H100 machine's virtio disk one 1 s write
    sample ran at 3.59 GB/s where a 4.26 GB first write sustained 1.63. 0.0 when nbytes is less than one request."""
    import time

    if nbytes < RAW_FILE["request_bytes"]:
        return 0.0
    t0 = time.perf_counter()
    r = raw_whole_pass(path, nbytes, write=write)
    if not write:
        return r["bytes"] / r["seconds"]
    outputs.fsync_path(path, data_only=True)
    return r["bytes"] / (time.perf_counter() - t0)


def raw_first_write(path: str, nbytes: int) -> dict:
    """The raw device writing nbytes into a new file once, front to back (raw_file_pass's write), the file
    preallocated as checkpoint.save_file does, timed to fdatasync: the reference for a save to a new file, which
    raw_rates (rewrites of written blocks) is not. On ext4 a first write also converts each written range from
    unwritten to written (a journalled change per request). Leaves the file."""
    from .store import preallocate

    req = RAW_FILE["request_bytes"]
    n = -(-nbytes // req) * req
    if os.path.exists(path):
        os.unlink(path)
    reserved = preallocate(path, n)
    if not reserved:
        with open(path, "ab") as f:
            f.truncate(n)
    return {"raw_first_write_Bps": raw_file_pass(path, n, write=True), "raw_first_write_preallocated": reserved}
