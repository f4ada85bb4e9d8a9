"""External sort of int32 keys (CAM's merge sort) within a memory budget the user sets.

Phase 1 (runs): the input is cut into runs of budget/8 bytes (two input slots, torch.sort's values and
int64 indices, and writes in flight fit the budget); each run is sorted on the device and written back,
double-buffered (gpuio_apps.papers.pipeline). Phase 2 (merge): a streamed k-way merge with forecasting: every
run keeps one chunk in memory; the run whose chunk ends with the smallest key is the next to run dry, so
its next chunk is read while the keys up to that key (which no unread chunk can undercut) are merged and
the merged output is written back asynchronously. Chunk = budget / (4 k + 8), whole blocks.

Check: the output is sorted (inside every chunk read back and across chunk borders) and a permutation of
the input by count and three checksums (sum, sum of squares and sum of a multiplicative hash, all mod
2^64); at sizes that fit in memory also equal to torch.sort of the whole input.

Baselines: the same algorithm over synchronous pread/pwrite + copy (PosixStore), and over a hand-written
asynchronous reader/writer (a thread pool of pread/pwrite, `ThreadedStore` below): what a programmer
writes to overlap I/O without gpuio. Lines of code (CAM's comparison, counted from this source at run
time by `loc_report`): the merge's I/O calls are the same sync-looking `read_async(...)`/`wait()` lines on
every store; gpuio needs no more, the hand-written async version needs ThreadedStore on top.

    python -m gpuio_apps.papers.sort --size large --budget 2G --device cuda --cold
"""
from __future__ import annotations

import inspect
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from gpuio import defaults
from gpuio.future import Future, Polled

from . import common
from .pipeline import Step, buffer, drop_caches, regime, resolve_device, row, run_steps, sync, write_padded
from .store import PosixStore

SIZES = {  # n: keys; budget: device memory for the sort (bytes)
    "tiny": dict(n=1 << 18, budget=512 << 10),
    "small": dict(n=1 << 24, budget=16 << 20),
    "medium": dict(n=1 << 28, budget=256 << 20),
    "large": dict(n=1 << 32, budget=2 << 30),   # 4 Gi keys, 16 GiB, in a 2 GiB budget
}
KEY = 4  # int32
BLOCK = 4096
EXACT_CHECK_KEYS_MAX = 1 << 26  # at most this many keys: also compare with an in-memory torch.sort
_M = 0x9E3779B1


def keys(start: int, count: int, seed: int = 0, device="cpu") -> torch.Tensor:
    """Input keys [start, start + count): full int32 range, many duplicates at small sizes too. Made on
    `device` by its own generator (deterministic per device; CUDA's differ from the CPU's): at 4 Gi keys the
    CPU generator and checksums alone took minutes of a 10-minute GPU call."""
    device = torch.device(device)
    g = torch.Generator(device=device).manual_seed(seed * 1_000_003 + start)
    return torch.randint(-(1 << 31), 1 << 31, (count,), dtype=torch.int64, generator=g,
                         device=device).to(torch.int32)


def sort_keys(k: torch.Tensor) -> torch.Tensor:
    """Sorted copy: torch.sort on the GPU; NumPy's sort on the CPU (measured ~7x faster than torch.sort
    there for int32, which also builds an int64 index array)."""
    if k.device.type == "cpu":
        return torch.from_numpy(np.sort(k.numpy()))
    return torch.sort(k).values


def checksums(k: torch.Tensor) -> torch.Tensor:
    """[count, sum, sum of squares, sum of hash] (int64, wrapping): order-independent."""
    x = k.to(torch.int64)
    return torch.stack([torch.tensor(x.numel(), device=x.device), x.sum(), (x * x).sum(),
                        ((x * _M) & 0xFFFFFFFF).sum()])


class ThreadedStore(PosixStore):
    """The hand-written async baseline: pread/pwrite + copy on a thread pool (gpuio.Futures over the pool's)."""
    kind = "threads"

    def __init__(self, store, capacity_bytes: int, threads: int = 4, **kw):
        super().__init__(store, capacity_bytes, **kw)
        self._pool = ThreadPoolExecutor(threads)
        self._sync_read, self._sync_write = PosixStore.read_async, PosixStore.write_async

    def _staging(self, t, nbytes):  # one host buffer per request: requests run concurrently
        if t.device.type == "cpu":
            return t.view(torch.uint8).view(-1)
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=torch.cuda.is_available())

    def _future(self, call, *args) -> Future:
        # the pool's future as a gpuio.Future, bounded as the engine's requests are (io_timeout_ms)
        f = self._pool.submit(call, self, *args)
        work = Polled(f.done, lambda: f.result(0), defaults.get("io_timeout_ms") / 1000,
                      "thread-pool request")
        return Future(work, finish=lambda: f.result(0).wait())

    def read_async(self, ext, offset, out):
        return self._future(self._sync_read, ext, offset, out)

    def write_async(self, ext, offset, src):
        return self._future(self._sync_write, ext, offset, src)

    def data_path(self) -> str:
        return "threadpool pread/pwrite+copy"

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        super().close()


class ExternalSort:
    """device: where the input is made and the output checked (prepare, verify); the sort itself runs on
    the device given to run_steps/merge."""

    def __init__(self, n: int, budget: int, seed: int = 0, device="cpu"):
        self.n, self.budget, self.seed, self.device = n, budget, seed, torch.device(device)
        self.run_keys = (budget // 8) // BLOCK * BLOCK // KEY
        if self.run_keys <= 0:
            raise ValueError(f"budget={budget} bytes is too small: a run needs budget/8 >= {BLOCK} bytes")
        self.runs = -(-n // self.run_keys)
        self.chunk_keys = (budget // (4 * self.runs + 8)) // BLOCK * BLOCK // KEY
        if self.chunk_keys <= 0:
            raise ValueError(f"budget={budget} bytes is too small to merge {self.runs} runs: each run's merge "
                             f"chunk (budget / (4 x runs + 8)) must be at least {BLOCK} bytes")
        self.out_keys = max(self.chunk_keys, (1 << 20) // KEY)  # output written in pieces of >= 1 MiB
        self.bytes = -(-n * KEY // BLOCK) * BLOCK

    def alloc(self, *stores) -> None:
        for s in stores:
            self.ext = {name: s.alloc(name, self.bytes) for name in ("input", "runs", "output")}

    def run_len(self, r: int) -> int:
        return min(self.run_keys, self.n - r * self.run_keys)

    def prepare(self, store) -> None:
        """Write the input (untimed) and remember its checksums. The keys go out of one aligned host buffer
        (O_DIRECT writes it in place, many requests in flight)."""
        self.sums = torch.zeros(4, dtype=torch.int64, device=self.device)
        host = buffer(-(-self.run_keys * KEY // BLOCK) * BLOCK, torch.device("cpu"))
        for r in range(self.runs):
            k = keys(r * self.run_keys, self.run_len(r), self.seed, self.device)
            self.sums += checksums(k)
            write_padded(store, self.ext["input"], r * self.run_keys * KEY, k, host, BLOCK)
        self.sums = self.sums.cpu()

    # -- phase 1 --------------------------------------------------------------------------------------
    def _sort_run(self, r: int):
        n = self.run_len(r)

        def compute(bufs):
            v = sort_keys(bufs[0].view(torch.int32)[:n])
            pad = (-n) % (BLOCK // KEY)
            return [torch.cat([v, v.new_zeros(pad)]) if pad else v]
        return compute

    def run_steps(self, store) -> list[Step]:
        out = []
        for r in range(self.runs):
            nb = -(-self.run_len(r) * KEY // BLOCK) * BLOCK
            off = r * self.run_keys * KEY
            out.append(Step(reads=[(self.ext["input"], off, nb)], compute=self._sort_run(r),
                            writes=[(self.ext["runs"], off)], out_nbytes=[nb]))
        return out

    # -- phase 2 --------------------------------------------------------------------------------------
    def merge(self, store, device: torch.device, mode: str = "pipeline", order: list | None = None) -> dict:
        """The k-way merge. mode "pipeline": forecast reads overlap the merge, writes drain behind it;
        "compute": reads waited outside the clock, no writes; "io": replays `order` (the reads a pipeline
        pass made) and writes as many bytes, no merging. Returns seconds, compute_s, the read order."""
        if mode == "io":
            return self._merge_io(store, device, order)
        io_stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        wr_stream = torch.cuda.Stream(device) if device.type == "cuda" else None  # reads never queue behind writes
        clock, t_last = 0.0, time.perf_counter()
        pos = [0] * self.runs               # keys of run r read so far
        last = [0] * self.runs              # the last key read of run r
        held: list[torch.Tensor] = []       # per run: its keys in memory, not yet merged
        reads, writes = [], []
        pend, pend_n = [], 0                # merged keys not yet written (pieces; joined once per write)
        written = 0

        def start_read(r):  # one sync-looking call per chunk; the handle is waited on before use
            n = min(self.chunk_keys, self.run_len(r) - pos[r])
            nb = -(-n * KEY // BLOCK) * BLOCK
            dst = buffer(nb, device)
            ctx = torch.cuda.stream(io_stream) if io_stream is not None else _null()
            with ctx:
                h = store.read_async(self.ext["runs"], (r * self.run_keys + pos[r]) * KEY, dst)
            reads.append(r)
            pos[r] += n
            return h, dst, n

        def take(h, dst, n):
            h.wait()
            return dst.view(torch.int32)[:n]

        def flush(final=False):  # the merged keys go back in whole blocks, asynchronously
            nonlocal pend, pend_n, written
            step = BLOCK // KEY
            cut = pend_n if final else pend_n // self.out_keys * self.out_keys
            if cut == 0:
                return
            joined = torch.cat(pend) if len(pend) > 1 else pend[0]
            out, rest = joined[:cut], joined[cut:]
            pend, pend_n = ([rest] if rest.numel() else []), rest.numel()
            pad = (-cut) % step
            out = torch.cat([out, out.new_zeros(pad)]) if pad else out.contiguous()
            if mode == "pipeline":
                if device.type == "cuda":
                    out.record_stream(wr_stream)
                    wr_stream.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(wr_stream):
                        writes.append((store.write_async(self.ext["output"], written * KEY, out), out))
                else:
                    writes.append((store.write_async(self.ext["output"], written * KEY, out), out))
                while len(writes) > 2:
                    writes.pop(0)[0].wait()
            written += cut

        def untimed(fn):
            nonlocal clock, t_last
            sync(device)
            clock += time.perf_counter() - t_last
            v = fn()
            t_last = time.perf_counter()
            return v

        if mode == "compute":
            held = [untimed(lambda r=r: take(*start_read(r))) for r in range(self.runs)]
        else:
            held = [take(*h) for h in [start_read(r) for r in range(self.runs)]]  # all first chunks in flight
        last = [int(k[-1]) for k in held]
        while True:
            open_runs = [r for r in range(self.runs) if pos[r] < self.run_len(r)]
            nxt = None
            if open_runs:
                r_star = min(open_runs, key=lambda r: last[r])
                cutoff = last[r_star]
                if mode == "pipeline":
                    nxt = (r_star, start_read(r_star))
            parts = []
            if open_runs:
                bound = torch.tensor([cutoff], dtype=torch.int32, device=device)
            for r in range(self.runs):
                k = held[r]
                if not k.numel():
                    continue
                cut = int(torch.searchsorted(k, bound, right=True)) if open_runs else k.numel()
                if cut:
                    parts.append(k[:cut])
                    held[r] = k[cut:]
            if parts:
                merged = sort_keys(torch.cat(parts)) if len(parts) > 1 else parts[0]
                if mode == "pipeline":
                    pend.append(merged)
                    pend_n += merged.numel()
                    flush()
                else:
                    written += merged.numel()
            if not open_runs:
                break
            if mode == "compute":
                got = untimed(lambda: take(*start_read(r_star)))
            else:
                r_star, got = nxt[0], take(*nxt[1])
            # r_star's keys in memory were all <= cutoff = its last key, so all merged: the chunk replaces them
            held[r_star] = got
            last[r_star] = int(got[-1])
        if mode == "pipeline":
            flush(final=True)
            for h, _ in writes:
                h.wait()
            sync(device)
            store.sync()
        sync(device)
        clock += time.perf_counter() - t_last
        if written != self.n:
            raise AssertionError(f"merge emitted {written} keys, expected {self.n}")
        return {"seconds": clock, "order": reads}

    def _merge_io(self, store, device, order) -> dict:
        """The merge's I/O alone: the same chunk reads in the same order, the output written in full."""
        pos = [0] * self.runs
        sync(device)
        t0 = time.perf_counter()
        pending, out = [], buffer(-(-self.out_keys * KEY // BLOCK) * BLOCK, device).zero_()
        prev = None
        for r in order:
            n = min(self.chunk_keys, self.run_len(r) - pos[r])
            dst = buffer(-(-n * KEY // BLOCK) * BLOCK, device)
            h = store.read_async(self.ext["runs"], (r * self.run_keys + pos[r]) * KEY, dst)
            pos[r] += n
            if prev is not None:
                prev.wait()
            prev = h
        if prev is not None:
            prev.wait()
        for off in range(0, self.bytes, out.numel()):
            nb = min(out.numel(), self.bytes - off)
            pending.append(store.write_async(self.ext["output"], off, out[:nb]))
            while len(pending) > 2:
                pending.pop(0).wait()
        for h in pending:
            h.wait()
        store.sync()
        sync(device)
        return {"seconds": time.perf_counter() - t0}

    # -- check ----------------------------------------------------------------------------------------
    def verify(self, store) -> str:
        """The output read back onto self.device (CUDA: 64 MiB reads, checks on the GPU)."""
        sums = torch.zeros(4, dtype=torch.int64, device=self.device)
        prev = None
        piece = 1 << (24 if self.device.type == "cuda" else 22)
        buf = buffer(-(-min(self.n, piece) * KEY // BLOCK) * BLOCK, self.device)
        exact = self.n <= EXACT_CHECK_KEYS_MAX
        whole = []
        for start in range(0, self.n, piece):
            cnt = min(piece, self.n - start)
            nb = -(-cnt * KEY // BLOCK) * BLOCK
            store.read(self.ext["output"], start * KEY, buf[:nb])
            k = buf[:nb].view(torch.int32)[:cnt].clone()
            if cnt > 1 and bool((k[1:] < k[:-1]).any()):
                at = int((k[1:] < k[:-1]).nonzero()[0]) + start
                raise AssertionError(f"sort output is not sorted at key {at}")
            if prev is not None and int(k[0]) < prev:
                raise AssertionError(f"sort output is not sorted across keys {start - 1} and {start}")
            prev = int(k[-1])
            sums += checksums(k)
            if exact:
                whole.append(k)
        sums = sums.cpu()
        if not torch.equal(sums, self.sums):
            raise AssertionError(f"sort output is not a permutation of the input: [count, sum, sum of squares, "
                                 f"hash sum] {sums.tolist()} != input {self.sums.tolist()}")
        if exact:
            ref = torch.sort(torch.cat([keys(r * self.run_keys, self.run_len(r), self.seed, self.device)
                                        for r in range(self.runs)])).values
            if not torch.equal(torch.cat(whole), ref):
                raise AssertionError("sort output differs from the in-memory torch.sort of the input")
        return f"ok (sorted, count+3 checksums{', equal to in-memory sort' if exact else ''})"


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_IO_CALL = re.compile(r"store\.(read_async|write_async|sync)\(|\.wait\(\)")


def loc_report() -> dict:
    """CAM's lines-of-code comparison, counted from this file: the merge's I/O lines (the calls of the store
    API: read_async, write_async, wait, sync) are the same sync-looking calls on every store; hand-written
    async I/O needs ThreadedStore's lines on top."""
    src = inspect.getsource(ExternalSort.merge)
    io_lines = sum(1 for line in src.splitlines() if _IO_CALL.search(line))
    threaded = [line for line in inspect.getsource(ThreadedStore).splitlines()
                if line.strip() and not line.strip().startswith(("#", '"""'))]
    return {"merge_io_lines_gpuio": io_lines, "merge_io_lines_handwritten_async": io_lines + len(threaded)}


def _timed_pass(app, store, dev, cold):
    drop_caches(cold)
    p1 = run_steps(store, app.run_steps(store), dev, "pipeline")
    drop_caches(cold)
    p2 = app.merge(store, dev, "pipeline")
    return p1["seconds"] + p2["seconds"], p2["order"]


def run(size: str = "tiny", store=None, device: str = "auto", cold: bool = False, workers: int | None = None,
        keep: bool = False, threads_baseline: bool = True, **overrides) -> dict:
    prm = common.size_params(SIZES, size)
    prm.update(overrides)
    dev = resolve_device(device)
    store = store or common.default_store("sort")
    app = ExternalSort(prm["n"], prm["budget"], device=dev)
    g, p = common.open_pair(store, 3 * app.bytes, workers, device=dev)
    stores = [g, p]

    def say(what: str, seconds: float) -> None:  # each pass as it ends: a cut-off run still tells its passes
        print(f"sort {size} ({app.n} keys, {app.runs} runs): {what} {seconds:.3f} s", flush=True)

    try:
        app.alloc(g, p)
        t0 = time.perf_counter()
        app.prepare(g)
        say("prepare (untimed)", time.perf_counter() - t0)
        # Untimed: one run step through each store, so the first timed pass does not also pay for attaching
        # the GPU layer and its bounce pool (as gpuio_apps.papers.pipeline.measure_steps does)
        for s in (g, p):
            run_steps(s, app.run_steps(s)[:1], dev, "io")
        failure = drop_caches(cold)
        io1 = run_steps(g, app.run_steps(g), dev, "io")
        say("runs phase I/O only", io1["seconds"])
        comp1 = run_steps(g, app.run_steps(g), dev, "compute")
        say("runs phase compute only", comp1["compute_s"])
        gpu_s, order = _timed_pass(app, g, dev, cold)
        say("gpuio (runs + merge)", gpu_s)
        check = app.verify(g)
        drop_caches(cold)
        io2 = app.merge(g, dev, "io", order)
        say("merge I/O only", io2["seconds"])
        comp2 = app.merge(g, dev, "compute")
        say("merge compute only", comp2["seconds"])
        base_s, _ = _timed_pass(app, p, dev, cold)
        say("pread/pwrite+copy (runs + merge)", base_s)
        check_b = app.verify(p)
        extra = {}
        if threads_baseline:
            t = ThreadedStore(store, 3 * app.bytes)
            stores.append(t)
            app.alloc(t)
            extra["threads_s"], _ = _timed_pass(app, t, dev, cold)
            say("thread-pool pread/pwrite (runs + merge)", extra["threads_s"])
            check_b += "" if app.verify(t).startswith("ok") else "; threaded baseline wrong"
        return row("sort", size, regime(cold, failure), g.data_path(), gpu_s, "pread/pwrite+copy", base_s,
                   io1["seconds"] + io2["seconds"], comp1["compute_s"] + comp2["seconds"],
                   check if check == check_b else f"{check}; baseline: {check_b}", on=dev.type, n=app.n,
                   budget=app.budget, runs=app.runs, chunk_bytes=app.chunk_keys * KEY,
                   io_runs_s=io1["seconds"], io_merge_s=io2["seconds"], **loc_report(), **extra)
    finally:
        for s in stores:
            s.close()
        if not keep:
            common.remove(store)


def main(argv=None) -> int:
    ap = common.parser("sort", __doc__, SIZES)
    ap.add_argument("--budget", default=None, help="memory budget, e.g. 2G (default: the size's)")
    ap.add_argument("--keys", default=None, help="number of keys, e.g. 4G (= 4 Gi keys) or 2147483648 (default: the size's)")
    ap.add_argument("--no-threads", action="store_true", help="leave out the thread-pool (hand-written async) baseline")
    ap.add_argument("--json", default=None, help="write the row (with the judged ratios) here, as `gpuio bench apps` does")
    a = ap.parse_args(argv)
    over = {}
    from ..bench.datafile import parse_size
    if a.budget:
        over["budget"] = parse_size(a.budget)
    if a.keys:
        over["n"] = parse_size(a.keys)
    r = run(a.size, a.store, a.device, a.cold, a.workers, a.keep, threads_baseline=not a.no_threads, **over)
    common.print_row(r)
    print(f"runs {r['runs']} x merge chunk {r['chunk_bytes']} B in budget {r['budget']} B; "
          f"hand-written async (thread pool) {r.get('threads_s', float('nan')):.3f} s; "
          f"lines of I/O code in the merge: gpuio {r['merge_io_lines_gpuio']}, "
          f"hand-written async {r['merge_io_lines_handwritten_async']}")
    if a.json:
        from .report import report
        return report([r], a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
