"""The GPU path (CAM): reads and writes between storage and GPU memory, stream-ordered, CPU-managed queues.

    eng = gpuio.Engine("data.bin")
    out = gpuio.empty((len(ids), 4096), torch.uint8, device="cuda")
    eng.read(ids_cuda, out)            # ordered on torch's current stream; the host does not wait
    f = eng.read_async(ids_cuda, out)  # gpuio.Future: done(), wait(), .event for other streams

Requests are cut into chunks of one bounce slot (GPU option bounce_bytes / 16). Block ids on the host are
handed to the engine at once; block ids already on the GPU (after GPU sampling, say) never cross to the
host on the caller's side: a kernel copies them into host-mapped memory and publishes the request into a
ring the engine's control plane polls. Either way the engine reads into the pinned bounce slot (host
memory), the stream waits for the chunk's completion word (stream_wait="kernel": a one-thread kernel polls
it; "wait_value": cuStreamWaitValue32, no SM), then copies the slot to the destination by copy engine, in
stream order. The rule behind this (docs/decisions/0001): no GPU-side wait may depend on a CUDA call a host thread has
yet to make, since a thread in a context-synchronising call (cudaFree, cuBLAS or module loading) blocks
every other thread's CUDA calls while it waits for the device: at 1cf507e a background loader beside a
training loop deadlocked that way. Host-side waits are bounded: the future's wait() raises OSError(ETIMEDOUT)
naming the request instead of hanging. engine.stats()["data_path"] says which path ran.
"""
from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from typing import Any

from . import _buffers
from . import defaults as _defaults
from . import _core as _core_module
from .future import Future, deprecated_alias

# The GPU options (engine.attach_gpu(**options)): gpuio.defaults' gpu rows, read from C++ (GpuOptions) but for the
# two the Python layer owns (stream_wait's "auto", wait_timeout_s). The options a GPU path is not given take their
# process-wide values (gpuio.defaults.get("gpu.<name>"): set(), GPUIO_GPU_<NAME>, else these defaults).
DEFAULTS: dict = _defaults.defaults_of("gpu")
STREAM_WAITS = _defaults.knob("gpu.stream_wait").choices
_WAIT_SLICE_S = 0.1  # a stream-ordered wait returns to Python (signals, Ctrl-C) at least this often
_PY_ONLY = tuple(k.key for k in _defaults.knobs("gpu") if k.key not in _core_module.gpu_defaults())  # not C++'s

_selftest: str | None = None

# CUDA state does not survive fork(): a runtime made before a fork, or torch's own CUDA initialisation, leaves the
# child unable to use CUDA. refuse_bad_fork() says so at once, before any CUDA call could fail obscurely or hang.
_runtime_made = False
_inherited_cuda = False


def _after_fork_in_child() -> None:
    global _inherited_cuda
    _inherited_cuda = _inherited_cuda or _runtime_made


os.register_at_fork(after_in_child=_after_fork_in_child)

BAD_FORK = ("CUDA cannot be used in this process: it is a fork of a process that had initialised CUDA (a "
            "DataLoader worker under the default 'fork' start method, say). Keep the CUDA side in the main process "
            "(sample in the workers and gather there: see README, 'Data loader workers') or start the workers "
            "with multiprocessing_context='spawn'")


def in_bad_fork() -> bool:
    """True in a forked child of a process where gpuio or torch had initialised CUDA."""
    if _inherited_cuda:
        return True
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    check = getattr(torch.cuda, "_is_in_bad_fork", None)
    return bool(check()) if check is not None else False


def refuse_bad_fork() -> None:
    """RuntimeError (BAD_FORK) at once where in_bad_fork()."""
    if in_bad_fork():
        raise RuntimeError(BAD_FORK)


def _core():
    return _core_module


def cuda_built() -> bool:
    """True when gpuio was built with its CUDA layer (the GPU path exists; probe() says whether a GPU does)."""
    return bool(_core().cuda_built)


def pread_memcpy_baseline(path: str, ids: Any, block_bytes: int, dst: Any, threads: int) -> float:
    """The naive GPU read every benchmark compares against: `threads` host threads pread each block of `ids`
    (int64 block numbers of `block_bytes`) from `path` and cudaMemcpy it into `dst` (a CUDA tensor of
    len(ids) * block_bytes bytes). Returns the seconds taken. RuntimeError without the CUDA layer."""
    if not cuda_built():
        raise RuntimeError(probe()["error"])
    return float(_core().gpu_pread_memcpy(os.fspath(path), _buffers.block_ids(ids, "ids"), block_bytes,
                                          _buffers.data_array(dst), threads))


def probe() -> dict:
    """CUDA devices as the C++ layer sees them: count, name, error (why none is usable), versions."""
    return dict(_core().gpu_probe_devices())


def gds_status() -> dict:
    """Whether cuFile/GDS could move data SSD -> GPU directly (P2P), and why not."""
    nvfs = os.path.exists("/proc/driver/nvidia-fs/stats")
    if not nvfs:
        return {"p2p": False, "mode": "unavailable",
                "reason": "nvidia-fs is not loaded (/proc/driver/nvidia-fs missing): cuFile would run in "
                          "compatibility mode (a CPU bounce buffer), so gpuio uses its own staging path"}
    return {"p2p": False, "mode": "nvidia-fs loaded",
            "reason": "nvidia-fs is loaded but gpuio has no cuFile backend yet: staging path used"}


def stream_wait_selftest(timeout_s: float = 20.0) -> str:
    """Does cuStreamWaitValue32 release on a host-mapped word? Run once per process, in a child process,
    because a wait that never releases leaves its stream stuck. "works", "never released", "error: ..."."""
    global _selftest
    if _selftest is not None:
        return _selftest
    if _defaults.get("environment.skip_stream_wait_selftest"):  # GPUIO_SKIP_STREAM_WAIT_SELFTEST
        _selftest = "skipped (GPUIO_SKIP_STREAM_WAIT_SELFTEST set)"
        return _selftest
    code = "from gpuio import _core; print(_core.gpu_stream_wait_selftest(2000))"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s, env=env)
        out = r.stdout.strip().splitlines()
        _selftest = out[-1] if r.returncode == 0 and out else f"error: exit {r.returncode}: {r.stderr.strip()[-200:]}"
    except subprocess.TimeoutExpired:
        _selftest = f"never released (self-test process killed after {timeout_s:.0f} s)"
    return _selftest


def empty(shape: Any, dtype: Any = None, device: Any = "cuda"):
    """An uninitialised tensor for gpuio reads: on the GPU (device="cuda[:i]"), or pinned host memory
    (device="cpu") when a GPU exists. dtype: a torch dtype, or anything torch.empty accepts; default uint8."""
    import torch

    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    if any(s < 0 for s in shape):
        raise ValueError(f"shape must not hold negative sizes, got {shape}")
    if dtype is None:
        dtype = torch.uint8
    if not isinstance(dtype, torch.dtype):
        from ._dtypes import element_type

        dtype = element_type(dtype).torch
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device={device!r} is not a device name (use 'cuda', 'cuda:1' or 'cpu')") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"device={device!r} but torch sees no CUDA device")
        return torch.empty(shape, dtype=dtype, device=dev)
    if dev.type == "cpu":
        return torch.empty(shape, dtype=dtype, pin_memory=torch.cuda.is_available())
    raise ValueError(f"device={device!r}: gpuio reads into 'cuda' or 'cpu' memory")


class StreamRequest:
    """A stream-ordered request as the work of its gpuio.Future: a completion event recorded on the stream after
    the request (in C++, from a pool: _core.StreamDone). poll() asks the event; block() waits for it (bounded),
    then raises the request's error (OSError/IndexError naming the block); event() makes a torch.cuda.Event
    other streams can wait on."""

    # No per-call tuple or torch objects: on a one-block read every microsecond here is latency.
    __slots__ = ("_gpu", "_done", "_keep", "_op", "_call", "_stream", "_device", "_event")

    def __init__(self, gpu: "GpuRuntime", done, keep, op: int, call: int, stream: int, device: int):
        self._gpu, self._done, self._keep = gpu, done, keep
        self._op, self._call, self._stream, self._device, self._event = op, call, stream, device, None

    def poll(self) -> bool:
        """True once the stream has passed the request (failed or not)."""
        return self._done.query()

    def block(self, timeout: float | None) -> None:
        """Block the host until the stream passed this request, at most timeout seconds (None: the GPU option
        wait_timeout_s), then raise OSError(ETIMEDOUT) naming the request; raise the request's error. The event
        is polled (in C++, GIL released: 2 ms of polls, then naps growing to 1 ms) rather than synchronized on,
        so no wait can hang the caller."""
        limit = self._gpu.options["wait_timeout_s"] if timeout is None else float(timeout)
        if not self._wait(limit):
            s = self._gpu.runtime.stats()
            what = (f"stream-ordered {'read' if self._op == 0 else 'write'} of {len(self._keep)} blocks (call "
                    f"{self._call} of this engine, stream {self._stream:#x})")
            raise OSError(errno.ETIMEDOUT,
                          f"{what} not complete after {limit:g} s (the stream is stuck at or before it; "
                          f"GPU requests taken so far {s['gpu_requests']}, failures {s['gpu_failures']}, "
                          f"last error {s['gpu_last_error']!r})")
        rt = self._gpu.runtime
        if rt.failures() != self._done.before:
            msg = rt.last_error()
            if "out of range" in msg:
                raise IndexError(msg)
            raise OSError(errno.EIO, msg)

    def _wait(self, limit: float) -> bool:
        # Slices of at most _WAIT_SLICE_S: the GIL-free C++ wait returns to Python between them, so Ctrl-C (and
        # any signal handler) still gets through a long wait; a one-block read ends within the first slice.
        done = self._done
        if done.wait(min(limit, _WAIT_SLICE_S)):
            return True
        end = time.monotonic() + limit - _WAIT_SLICE_S
        while (left := end - time.monotonic()) > 0:
            if done.wait(min(left, _WAIT_SLICE_S)):
                return True
        return False

    def event(self):
        """A torch.cuda.Event that completes once the stream has passed the request; other streams can wait on
        it. Made on first use (most callers only wait()): recorded on a side stream of this GPU path that waits
        for the request's own event."""
        if self._event is None:
            self._event = self._gpu.event_after(self._done, self._device)
        return self._event


def __getattr__(name: str):
    if name == "StreamHandle":  # the old name of what stream-ordered calls return, kept for one release
        return deprecated_alias("gpuio.gpu.StreamHandle")
    if name == "GpuPath":  # the old name of an engine's GPU runtime (C++ and Python now say GpuRuntime)
        from ._deprecated import renamed

        return renamed("gpuio.gpu.GpuPath", "gpuio.gpu.GpuRuntime", GpuRuntime)
    raise AttributeError(f"module 'gpuio.gpu' has no attribute {name!r}")


def mapped_view(host: Any, device: Any):
    """A CUDA tensor on `device` that aliases the pinned host tensor `host` (same shape and dtype): kernels on
    that GPU read it in place over PCIe, as GIDS's constant CPU buffer is read. None where that is not possible
    (no CUDA layer, no GPU, or host not pinned): the caller copies instead. The view keeps host alive."""
    import torch

    core = _core()
    dev = torch.device(device)
    if (not core.cuda_built or dev.type != "cuda" or not torch.cuda.is_available() or not host.is_pinned()
            or not host.is_contiguous()):
        return None
    try:
        raw = core.gpu_mapped_view(host.view(-1).view(torch.uint8), dev.index if dev.index is not None
                                   else torch.cuda.current_device())
    except ValueError:
        return None
    return torch.from_dlpack(raw).view(host.dtype).view(host.shape)


class GpuRuntime:
    """The CUDA layer of one gpuio.Engine, owned by it: engine.gpu (default options, created on first GPU
    use) or engine.attach_gpu(**options). The runtime holds the engine's C++ object alive (keep-alive)."""

    def __init__(self, engine, **options: Any):
        unknown = set(options) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"unknown GPU option(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}")
        options = dict(_defaults.values("gpu", set(DEFAULTS) - set(options)), **options)
        wait = options["stream_wait"]
        if wait not in STREAM_WAITS:
            why = (" (hostfn was removed: CUDA forbids a host function waiting on the engine's copies, which "
                   "are not ordered before it; it deadlocked on the H200)" if wait == "hostfn" else "")
            raise ValueError(f"stream_wait={wait!r} is not one of {', '.join(STREAM_WAITS)}{why}")
        t = options["wait_timeout_s"]
        if not isinstance(t, (int, float)) or t <= 0:
            raise ValueError(f"wait_timeout_s must be a positive number of seconds, got {t!r}")
        core = _core()
        if not core.cuda_built:
            raise RuntimeError(probe()["error"])
        import torch  # noqa: F401  (streams and events come from torch)

        opts = options
        if opts["device"] < 0 and torch.cuda.is_available():
            opts["device"] = torch.cuda.current_device()
        self.engine = engine
        self.options = opts
        self._submitted = 0
        self.stream_wait_selftest = stream_wait_selftest()
        if opts["stream_wait"] == "auto":
            opts["stream_wait"] = "wait_value" if self.stream_wait_selftest == "works" else "kernel"
        global _runtime_made
        _runtime_made = True
        self._rt = core.GpuRuntime(engine.core, {k: v for k, v in opts.items() if k not in _PY_ONLY})
        self._side_streams: dict = {}  # device -> torch.cuda.Stream for the futures' .event
        self._tensor = torch.Tensor
        from torch.utils.dlpack import to_dlpack

        self._to_dlpack = to_dlpack
        # torch's current stream of a device as a cudaStream_t int, without making a torch.cuda.Stream object
        # (the private binding torch.compile's generated code uses; the public call where a build lacks it)
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self._raw_stream = raw if raw is not None else (lambda d: torch.cuda.current_stream(d).cuda_stream)

    def _export(self, x: Any) -> Any:
        """A plain torch tensor as a DLPack capsule for the binding (everything else, and a tensor DLPack cannot
        carry (sparse, conjugate), as given: the binding then names what is wrong with it)."""
        if type(x) is not self._tensor:
            return x
        try:
            return self._to_dlpack(x)
        except Exception:  # noqa: BLE001 - the binding's own refusal is the message
            return x

    def submit(self, op: int, ids: Any, data: Any, buf: Any, device: int):
        """Engine's entry for a request that touches CUDA memory (ids or data on GPU `device`, which the engine
        found): queue it on torch's current stream of that GPU and return its gpuio.Future (a StreamRequest's;
        .event for other streams). The binding checks ids and data (dtype, contiguity, byte count, one GPU); the
        request keeps them alive until the stream has
        passed the request. On a one-block read's critical path: no torch Stream or Event objects are made, and
        tensors reach the binding as DLPack capsules (torch.utils.dlpack.to_dlpack: C, where Tensor.__dlpack__
        runs Python checks; 6 us per tensor on a CPU box)."""
        stream = self._raw_stream(device)
        try:
            done = self._rt.stream_submit(stream, op, self._export(ids), self._export(data))
        except (TypeError, ValueError):
            # Refused before any work was queued: the arrays themselves give the one-line reason naming the
            # argument (a capsule cannot say which tensor it came from).
            done = self._rt.stream_submit(stream, op, ids, data)
        self._submitted += 1
        req = StreamRequest(self, done, ids, op, self._submitted, stream, device)
        return Future(req, buf, None, req.event)

    @property
    def runtime(self):
        """The C++ GPU runtime (gpuio._core.GpuRuntime) of this path: for gpuio's layers and benchmarks that
        call it directly (device-API queues, probes, stats)."""
        return self._rt

    def raw_stream(self, device: int) -> int:
        """torch's current stream of GPU `device` as a cudaStream_t int (what the runtime's calls take)."""
        return self._raw_stream(device)

    def event_after(self, done, device: int):
        """A torch.cuda.Event completing once `done` (a _core.StreamDone) has: recorded on this path's side
        stream of `device` after it waits for done. Events from the same side stream complete in order: one
        asked for later may also wait for requests submitted before it was asked for (never a cycle: a wait
        only ever names work already submitted)."""
        import torch

        side = self._side_streams.get(device)
        if side is None:
            side = self._side_streams.setdefault(device, torch.cuda.Stream(device=device))
        done.order(side.cuda_stream)
        event = torch.cuda.Event()
        event.record(side)
        return event

    def queue(self, i: int) -> tuple[int, int, int]:
        """(shared state address, tail address, index) of device-API queue i, for a user kernel's QueueRef."""
        return tuple(self._rt.queue_address(i))

    def latency_probe(self, ids, dst: Any, queue: int = 0, parts: bool = False, landed: bool = False,
                      hops: bool = False):
        """Per-read round trip (ns, GPU clock) of len(ids) one-block GPU-initiated reads into dst (CUDA memory
        of 64 slots of 4 KiB, reused round-robin). parts=True: (round trips, publish times): the publish alone
        (ring slot, request over PCIe, doorbell); the rest of each round trip is the control plane's pickup, the
        engine and the data's copy. hops=True: a dict of per-read lists (ns): total, publish, wait (publish end ->
        the requesting block seeing done) and copy (the block's own copy of a landed read; ~0 when the engine
        copied), plus the control plane's hops of the same reads (submit, engine, signal; CPU clock).
        landed=True: each read lands in host-mapped memory the probe owns and the probing thread block copies it
        to dst itself (DeviceQueue::prefetch_landed); otherwise DeviceQueue::prefetch, whose path the option
        device_read picks (auto: the same landed path for a one-block read, on the queue's own landing slots)."""
        ids, dst = [int(i) for i in ids], _buffers.data_array(dst)
        if hops:
            self._rt.take_device_api_trace()  # only this probe's requests below
            ns, pub, wait = self._rt.latency_probe_hops(queue, ids, dst, landed)
            cpu = self._rt.take_device_api_trace()
            return dict(total=list(ns), publish=list(pub), wait=list(wait),
                        copy=[t - p - w for t, p, w in zip(ns, pub, wait)],
                        submit=[c[0] for c in cpu], engine=[c[1] for c in cpu], signal=[c[2] for c in cpu])
        if parts:
            ns, pub = self._rt.latency_probe_parts(queue, ids, dst, landed)
            return list(ns), list(pub)
        return list(self._rt.latency_probe(queue, ids, dst, landed))

    def stats(self, base: dict) -> dict:
        """The GPU path's counters, given the engine's own stats (base) to name the data path."""
        s = dict(self._rt.stats())
        backend = base["backend"].split()[0] if base.get("backend") else self.engine.backend
        # Stream-ordered requests (Engine.read/write with CUDA memory): engine -> pinned bounce -> GPU by one
        # copy per chunk on the caller's stream. copy_mode is the device API's staging->GPU method.
        s["data_path"] = f"{base.get('data_path') or self.engine.backend}->bounce->gpu(stream copy)"
        s["stream_wait_sm_cost"] = ("one resident thread (1 warp slot) polling with __nanosleep per waiting stream"
                                    if s["stream_wait"] == "kernel" else "none")
        s["stream_wait_value_selftest"] = self.stream_wait_selftest
        s["gds"] = gds_status()["mode"]
        s["backend_detail"] = backend
        return s

    def close(self) -> None:
        """Stop taking GPU requests and release the runtime (the engine closes it with itself)."""
        self._rt.close()


__all__ = ["BAD_FORK", "DEFAULTS", "GpuRuntime", "StreamRequest", "cuda_built", "empty", "gds_status", "in_bad_fork",
           "mapped_view", "refuse_bad_fork",
           "pread_memcpy_baseline", "probe",
           "stream_wait_selftest"]
