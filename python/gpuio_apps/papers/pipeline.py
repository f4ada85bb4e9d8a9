"""The loop every streaming application here shares, and how it is measured (BENCHMARKS.md, Applications).

An application is a list of `Step`s: read some byte ranges, compute on them, write the outputs back.
`run_steps` runs them double-buffered: step i+1's reads are in flight while step i computes, and step i's
writes drain while step i+1 computes. It runs in three modes over the same steps:
  "pipeline"  reads, compute and writes overlapped (the application);
  "io"        the same reads and writes, no compute (writes send scratch buffers of the right sizes);
  "compute"   the same compute on inputs read beforehand outside the clock (each step timed alone);
so the ideal is max(io, compute) and a pipeline near it shows the overlap works.

Over a `PosixStore` (synchronous pread/pwrite + copy) the same loop is the CPU-centric baseline: nothing
overlaps there, so it takes about io + compute.

On a CUDA device the reads run on their own stream and wait (stream-ordered, no host stall) for the
compute that last used their buffer; the compute runs on the current stream after the host saw the read
complete (bounded waits: a stuck request raises instead of hanging); writes run on a third stream after
the compute that produced them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any, Callable, Sequence

import torch

from ..bench import os_cache
from .iodiag import PassProbe
from .store import Extent

HOST_PARTS = ("read_submit", "read_wait", "compute", "write_submit", "write_wait")  # run_steps' host_s keys
DEPTH_DEFAULT = 2  # input slots: step i computes while steps i+1 .. i+depth-1 read (2: double buffering);
                   # also the groups of step writes left in flight (each keeps its output tensors alive)


@dataclasses.dataclass
class Step:
    reads: list[tuple[Extent, int, int]]            # (extent, byte offset, nbytes) -> one uint8 input each
    compute: Callable[[list[torch.Tensor]], list[torch.Tensor]]  # inputs (uint8, on the device) -> outputs
    writes: list[tuple[Extent, int]] = dataclasses.field(default_factory=list)  # where each output goes
    out_nbytes: list[int] = dataclasses.field(default_factory=list)            # each output's size


def resolve_device(device: str) -> torch.device:
    """'auto' -> cuda when torch sees one, else cpu. A CUDA request without CUDA is an error, not a fallback."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device={device!r} is not a device name (use 'auto', 'cpu' or 'cuda')") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but torch sees no CUDA device")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device={device!r}: the applications run on 'cpu' or 'cuda'")
    return dev


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def buffer(nbytes: int, device: torch.device) -> torch.Tensor:
    """A uint8 buffer for reads: GPU memory, or 4 KiB-aligned host memory (O_DIRECT lands in it in place)."""
    if device.type == "cuda":
        return torch.empty(nbytes, dtype=torch.uint8, device=device)
    return host_piece(nbytes, pinned=False)


def host_piece(nbytes: int, pinned: bool) -> torch.Tensor:
    """A uint8 staging piece in 4 KiB-aligned host memory (O_DIRECT reads and writes it in place), page-locked
    when it is copied to or from CUDA memory (pinned), so those copies run at full rate. Pinned at exactly its
    size (cache.host_buffer.pinned_empty): torch's pinned allocator rounds 64 MiB + the alignment up to 128 MiB,
    and pinning is paid inside a checkpoint save's or load's clock."""
    if pinned and torch.cuda.is_available():
        from gpuio.cache.host_buffer import pinned_empty

        t = pinned_empty((nbytes,), torch.uint8)
        if t.data_ptr() % 4096 == 0:
            return t
    from gpuio.engine import aligned_empty

    return torch.from_numpy(aligned_empty(nbytes))


def write_padded(store, ext: Extent, offset: int, values: torch.Tensor, host: torch.Tensor,
                 block: int = 4096) -> None:
    """Write the 1-D tensor `values` at `offset` of `ext` through the aligned host buffer `host` (a uint8
    buffer of at least the values' bytes rounded up to `block`): copied in, zero-padded to a whole block,
    written by O_DIRECT in place. `values` may live on any device."""
    n = values.numel() * values.element_size()
    nb = -(-n // block) * block
    if nb > n:
        host[n:nb].zero_()
    host[:n].view(values.dtype).copy_(values)
    store.write(ext, offset, host[:nb])


class _Streams:
    """CPU: no streams. CUDA: an io stream and `slots` write streams beside the current (compute) one, with
    buffer events. Writes take the write streams in turn: a stream-ordered write of CUDA memory moves one
    bounce chunk at a time on its stream (device->bounce copy, then the engine, then the next chunk), so
    one write stream would leave one write at a time in flight however many the pipeline keeps pending."""

    def __init__(self, device: torch.device, slots: int):
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.io = torch.cuda.Stream(device)
            self.wrs = [torch.cuda.Stream(device) for _ in range(slots)]
            self.turn = 0
            self.freed = [torch.cuda.Event() for _ in range(slots)]
            self.used = [False] * slots

    def on_io(self, slot: int):
        if not self.cuda:
            return contextlib.nullcontext()
        if self.used[slot]:
            self.io.wait_event(self.freed[slot])  # the compute that last read this slot is done
        return torch.cuda.stream(self.io)

    def release(self, slot: int) -> None:
        if self.cuda:
            self.freed[slot].record(torch.cuda.current_stream())
            self.used[slot] = True

    def on_write(self, outs: list[torch.Tensor]):
        if not self.cuda:
            return contextlib.nullcontext()
        wr = self.wrs[self.turn]
        self.turn = (self.turn + 1) % len(self.wrs)
        wr.wait_stream(torch.cuda.current_stream())  # after the compute that produced outs
        for o in outs:
            if o.is_cuda:
                o.record_stream(wr)
        return torch.cuda.stream(wr)


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8).view(-1)


def run_steps(store, steps: list[Step], device: torch.device, mode: str = "pipeline",
              depth: int = DEPTH_DEFAULT) -> dict:
    """Run `steps` over `store` (a Store or PosixStore) in `mode` with `depth` input slots; {"seconds",
    "compute_s", "bytes_read", "bytes_written"}. compute_s is only measured in "compute" mode (the other
    modes overlap it). An output tensor of step i may be reused by step i + depth + 1 (its write is done)."""
    if mode not in ("pipeline", "io", "compute"):
        raise ValueError(f"mode must be 'pipeline', 'io' or 'compute', got {mode!r}")
    if not isinstance(depth, int) or depth < 2:
        raise ValueError(f"depth must be an int >= 2 (input slots), got {depth!r}")
    nreads = max((len(s.reads) for s in steps), default=0)
    sizes = [max((s.reads[j][2] for s in steps if len(s.reads) > j), default=0) for j in range(nreads)]
    bufs = [[buffer(n, device) for n in sizes] for _ in range(depth)]
    scratch = None
    if mode == "io":
        outs = max((max(s.out_nbytes, default=0) for s in steps), default=0)
        scratch = buffer(max(outs, store.block_size), device).zero_()
    st = _Streams(device, depth)
    moved = {"r": 0, "w": 0}
    # host seconds per activity in the timed modes (where a slow pass spends its time): submitting and waiting
    # for reads and writes, and the compute calls (kernel launches on CUDA)
    host = dict.fromkeys(HOST_PARTS, 0.0)

    def inputs(i: int, slot: int) -> list[torch.Tensor]:
        return [bufs[slot][j][:n] for j, (_, _, n) in enumerate(steps[i].reads)]

    def issue_reads(i: int, slot: int) -> list:
        t = time.perf_counter()
        with st.on_io(slot):
            hs = [store.read_async(ext, off, buf) for (ext, off, _), buf in zip(steps[i].reads, inputs(i, slot))]
        moved["r"] += sum(n for _, _, n in steps[i].reads)
        host["read_submit"] += time.perf_counter() - t
        return hs

    def issue_writes(i: int, outs: list[torch.Tensor]) -> tuple:
        t = time.perf_counter()
        outs = [_as_bytes(o) for o in outs]
        with st.on_write(outs):
            hs = [store.write_async(ext, off, o) for (ext, off), o in zip(steps[i].writes, outs)]
        moved["w"] += sum(o.numel() for o in outs)
        host["write_submit"] += time.perf_counter() - t
        return hs, outs

    if mode == "compute":
        if steps:  # one untimed run first: kernels, allocator and first-touch costs are not the steps'
            for h in issue_reads(0, 0):
                h.wait()
            steps[0].compute(inputs(0, 0))
            st.release(0)
        total = 0.0
        for i, s in enumerate(steps):
            for h in issue_reads(i, 0):
                h.wait()
            sync(device)
            t0 = time.perf_counter()
            s.compute(inputs(i, 0))
            sync(device)
            total += time.perf_counter() - t0
            st.release(0)
        return {"seconds": total, "compute_s": total, "bytes_read": 0, "bytes_written": 0}

    sync(device)
    t0 = time.perf_counter()
    pending: list[tuple] = []
    ahead = [issue_reads(i, i % depth) for i in range(min(depth - 1, len(steps)))]
    for i, s in enumerate(steps):
        j = i + depth - 1
        if j < len(steps):  # into the slot step i-1 used (released after its compute)
            ahead.append(issue_reads(j, j % depth))
        tw = time.perf_counter()
        for r in ahead.pop(0):
            r.wait()
        host["read_wait"] += time.perf_counter() - tw
        if mode == "pipeline":
            tw = time.perf_counter()
            outs = s.compute(inputs(i, i % depth))
            host["compute"] += time.perf_counter() - tw
        else:
            outs = [scratch[:n] for n in s.out_nbytes]
        st.release(i % depth)
        if s.writes:
            pending.append(issue_writes(i, outs))
            tw = time.perf_counter()
            while len(pending) > depth:
                for w in pending.pop(0)[0]:
                    w.wait()
            host["write_wait"] += time.perf_counter() - tw
    tw = time.perf_counter()
    for hs, _ in pending:
        for w in hs:
            w.wait()
    sync(device)
    if moved["w"]:
        store.sync()  # written means durable for both stores (the baseline's writes sit in the page cache)
    host["write_wait"] += time.perf_counter() - tw
    return {"seconds": time.perf_counter() - t0, "compute_s": None, "bytes_read": moved["r"],
            "bytes_written": moved["w"], "host_s": host}


def drop_caches(cold: bool) -> str | None:
    """sync + drop the page cache when cold; None on success (or when not asked), else why not."""
    return os_cache.drop_caches() if cold else None


def regime(cold: bool, failure: str | None) -> str:
    if not cold:
        return "warm (page cache kept; gpuio O_DIRECT)"
    if failure:
        return "warm (drop_caches refused: not root?; gpuio O_DIRECT)"
    return "cold (caches dropped before each pass)"


def row(app: str, size: str, regime_text: str, data_path: str, gpuio_s: float, baseline: str, baseline_s: float,
        io_s: float, compute_s: float, check: str, **extra: Any) -> dict:
    """One line of the apps table: speedup = baseline / gpuio; of_ideal = gpuio / max(io, compute)."""
    ideal = max(io_s, compute_s)
    return dict(app=app, size=size, regime=regime_text, data_path=data_path, gpuio_s=gpuio_s, baseline=baseline,
                baseline_s=baseline_s, speedup=baseline_s / gpuio_s if gpuio_s > 0 else float("nan"),
                io_s=io_s, compute_s=compute_s, ideal_s=ideal,
                of_ideal=gpuio_s / ideal if ideal > 0 else float("nan"), check=check, **extra)


ROUNDS = 3  # timed passes of each kind (pipeline, io-only, baseline, others); each kind's figure is its best.
           # Three: on the H100 one call's best-of-two still put vecadd at 1.19 x max(io, compute) and another's
           # at 1.11, with single passes of one kind 10-18 % apart on this disk
           # (docs/archive/results/RESULTS_2026-11-26-apps.md)


def measure_steps(app: str, size: str, gstore, pstore, make_steps: Callable[[Any], list[Step]],
                  verify: Callable[[Any], str], device: torch.device, cold: bool, baseline: str,
                  depth: int = DEPTH_DEFAULT, others: Sequence[Any] = (), rounds: int = ROUNDS,
                  **extra: Any) -> dict:
    """The standard comparison: gpuio compute-only, then `rounds` rounds of timed passes over the same steps:
    the gpuio pipeline, gpuio io-only, the same steps over the pread/pwrite store, and over each of `others`
    (more baseline stores over the same extents, e.g. kvikio_store.KvikioStore). Each round starts one kind
    later than the one before, so no kind always follows the same one (a pass that writes leaves the disk a
    write-back to finish, which slows the next pass: an H100 vecadd io-only pass took 9.62 s after the
    pipeline's and 8.18 s after the baseline's). Every kind's figure is its best pass (all are kept as
    <kind>_runs_s); every pipeline pass is verified. Page cache dropped before every timed pass where allowed.
    Each timed pass prints its I/O diagnostic (gpuio_apps.papers.iodiag), kept in the row as io_diag. Another store
    of kind K adds K_s, speedup_K (K / gpuio) and K_data_path to the row."""
    if not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be an int >= 1, got {rounds!r}")
    diag: list[str] = []

    def timed(store, mode: str, label: str) -> dict:
        probe = PassProbe(store)
        r = run_steps(store, make_steps(store), device, mode, depth)
        parts = ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in r["host_s"].items())
        diag.append(probe.line(f"{app} {size} {label} {r['seconds']:.3f} s (host s: {parts})"))
        print(diag[-1], flush=True)
        return r

    # Untimed: one step through each store first, so the first timed pass does not also pay for attaching
    # the GPU layer, its bounce pool and the copy-method probe (an H200 GEMM run had io-only 3.34 s > the
    # whole pipeline's 2.93 s, which flattered time / max(io, compute)).
    run_steps(gstore, make_steps(gstore)[:1], device, "io", depth)
    for st in (pstore, *others):
        run_steps(st, make_steps(st)[:1], device, "io", depth)
    # Compute-only first (its reads are outside the clock): a first timed pass also absorbs the device's
    # write-back of the freshly prepared data.
    comp = run_steps(gstore, make_steps(gstore), device, "compute", depth)
    kinds = [("pipeline", gstore, "pipeline"), ("io-only", gstore, "io"), ("baseline", pstore, "pipeline"),
             *((st.kind, st, "pipeline") for st in others)]
    runs: dict[str, list[dict]] = {k: [] for k, _, _ in kinds}
    checks: dict[str, list[str]] = {k: [] for k, _, mode in kinds if mode == "pipeline"}
    failure = None
    for rnd in range(rounds):
        for name, st, mode in kinds[rnd % len(kinds):] + kinds[:rnd % len(kinds)]:
            failure = drop_caches(cold) or failure
            runs[name].append(timed(st, mode, name if rnd == 0 else f"{name} (round {rnd + 1})"))
            if mode == "pipeline":
                checks[name].append(verify(st))
    best = {k: min(r["seconds"] for r in v) for k, v in runs.items()}
    check = checks["pipeline"][0]
    bad = [f"{k} pass {i + 1}: {c}" for k, cs in checks.items() for i, c in enumerate(cs) if c != check]
    more: dict[str, Any] = {f"{k.replace('-only', '')}_runs_s": [r["seconds"] for r in v] for k, v in runs.items()}
    for st in others:
        more.update({f"{st.kind}_s": best[st.kind], f"{st.kind}_data_path": st.data_path(),
                     f"speedup_{st.kind}": best[st.kind] / best["pipeline"] if best["pipeline"] > 0 else float("nan")})
    if pstore.kind == "librbd-sync":  # a volume's baseline is Basic, whatever the app calls its file baseline
        baseline = f"Basic ({pstore.data_path()})"
    full = runs["pipeline"][0]
    return row(app, size, regime(cold, failure), gstore.data_path(), best["pipeline"], baseline, best["baseline"],
               best["io-only"], comp["compute_s"], check if not bad else f"{check}; " + "; ".join(bad),
               bytes_read=full["bytes_read"], bytes_written=full["bytes_written"], depth=depth, rounds=rounds,
               io_diag=diag, **more, **extra)
