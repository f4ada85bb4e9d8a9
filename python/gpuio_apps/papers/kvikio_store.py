"""The KvikIO baseline of the applications (docs/decisions/0006): the same extents as Store and PosixStore, over
the same files and the same RAID-0 map (store._Base), read and written by `kvikio.CuFile(path, "r+")`
.pread/.pwrite straight into the destination tensor (CUDA tensors through __cuda_array_interface__, host
tensors as numpy arrays). KvikIO runs each request as tasks on its own thread pool (KVIKIO_NTHREADS,
KVIKIO_TASK_SIZE: its defaults unless set); the request's gpuio.Future joins KvikIO's futures.

Compat mode is forced ON: the GPU machine has no nvidia-fs, so KvikIO reads with POSIX pread into its bounce
buffer and copies that to the GPU (no GPUDirect); data_path says so. Only the kvikio-cu13, libkvikio-cu13 and
rapids-logger wheels are needed (no cupy: the CuFile path does not import it). KvikIO needs libcuda even
for host buffers, so on a machine without a GPU driver `load_kvikio` reports why and the apps skip the baseline.

    kv = load_kvikio()        # the module, or raises ImportError with the reason
    st = KvikioStore(paths, capacity_bytes)
"""
from __future__ import annotations

import os
import tempfile
from typing import Any

import torch

from gpuio import defaults
from gpuio.future import Future, Polled

from .store import BLOCK_BYTES_DEFAULT, STRIPE_BYTES_DEFAULT, Extent, _Base, _nbytes, is_volume, paths_of

COMPAT_MODE = "ON"  # no nvidia-fs on the GPU machine: KvikIO's POSIX + bounce-buffer path
# the probe's read: 1 MiB into a fresh (page-aligned) NumPy array. A 4 KiB read into a small heap array corrupted
# the heap in KvikIO 26.10 compat mode on the H100 and H200 (glibc abort at the next free, after close); 1 MiB
# reads, host or CUDA, 26.10 / 26.08 / 25.12, did not (docs/archive/results/RESULTS_2026-11-25-night.md)
PROBE_BYTES = 1 << 20
_LOADED = None  # the module once load_kvikio's probe passed: probed once per process


def load_kvikio():
    """Import kvikio in compat mode, or raise ImportError saying why it cannot be used here. The wheels'
    libkvikio loader loads librapids_logger only when cuda.pathfinder is installed (it is not beside the
    three wheels), so it is loaded here first; KvikIO resolves libcuda at its first I/O, probed here with
    a PROBE_BYTES read of a temporary file into host memory so a missing driver shows up as a reason, not
    later. The probe runs once per process: the GEMM app opens a store per dtype, and on the H100 (11-26) the
    second probe's clean-up aborted the process with a corrupted heap every time; probed once, both dtypes ran
    (an isolated repeat of the probe, with and without CUDA reads between, did not abort: the cause inside
    KvikIO is not pinned). GPUIO_KVIKIO=off turns the baseline off (`scripts/gpu.sh apps` reruns a step so
    when KvikIO aborts the process)."""
    global _LOADED
    if os.environ.get("GPUIO_KVIKIO", "").strip().lower() in ("0", "off", "no", "false"):
        raise ImportError(f"turned off by GPUIO_KVIKIO={os.environ['GPUIO_KVIKIO']}")
    if _LOADED is not None:
        return _LOADED
    os.environ.setdefault("KVIKIO_COMPAT_MODE", COMPAT_MODE)
    try:
        try:
            import rapids_logger

            rapids_logger.load_library()
        except ModuleNotFoundError:
            pass  # a system librapids_logger may serve
        import kvikio
        import kvikio.defaults
        import numpy as np

        kvikio.defaults.set("compat_mode", kvikio.CompatMode.ON)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "probe.bin")
            with open(path, "wb") as w:
                w.write(bytes(PROBE_BYTES))
            f = kvikio.CuFile(path, "r")
            try:
                f.pread(np.empty(PROBE_BYTES, dtype=np.uint8), PROBE_BYTES, 0).get()
            finally:
                f.close()
    except ImportError as e:
        raise ImportError(f"kvikio not importable: {e}") from e
    except Exception as e:  # noqa: BLE001 - e.g. RuntimeError "libcuda.so.1: cannot open shared object file"
        raise ImportError(f"kvikio unusable here: {type(e).__name__}: {str(e)[:200]}") from e
    _LOADED = kvikio
    return kvikio


def _kvikio_future(futures: list, lengths: list[int], result, what: str) -> Future:
    """One request's gpuio.Future over its KvikIO futures (one per run of consecutive bytes in one file): polled,
    bounded by the engine's io_timeout_ms as gpuio's own requests are; a short run is the request's error."""
    def check() -> None:
        for f, n in zip(futures, lengths):
            got = f.get()
            if got != n:
                raise OSError(f"short KvikIO {what}: {got} of {n} bytes")
    work = Polled(lambda: all(f.done() for f in futures), check, defaults.get("io_timeout_ms") / 1000,
                  f"KvikIO {what}")
    return Future(work, result)


class KvikioStore(_Base):
    """The same extents over kvikio.CuFile: KvikIO's pread/pwrite into the destination (see the module)."""
    kind = "kvikio"

    def __init__(self, store: Any, capacity_bytes: int, block_size: int = BLOCK_BYTES_DEFAULT,
                 stripe_bytes: int = STRIPE_BYTES_DEFAULT, **_ignored: Any):
        if is_volume(paths_of(store)):
            raise ValueError("KvikIO reads files; the store names Ceph volumes")
        self._kv = load_kvikio()
        super().__init__(store, capacity_bytes, block_size, stripe_bytes)
        self._files = [self._kv.CuFile(p, "r+") for p in self.paths]

    @staticmethod
    def _target(t: torch.Tensor):
        # CUDA: the tensor itself (__cuda_array_interface__); host: a numpy view of the same memory
        flat = t.view(torch.uint8).view(-1)
        return flat if flat.is_cuda else flat.numpy()

    def _cuda_ordered(self, t: torch.Tensor) -> None:
        # KvikIO copies on its own streams: the kernels queued on the current stream that last used this
        # memory (the compute that read a slot, the one that produced an output) must be done first
        if t.is_cuda:
            torch.cuda.current_stream(t.device).synchronize()

    def _submit(self, what: str, ext: Extent, offset: int, t: torch.Tensor, result):
        nbytes = _nbytes(t, self.block_size, "out" if what == "read" else "src")
        ids = self._ids(ext, offset, nbytes)
        self._cuda_ordered(t)
        buf = self._target(t)
        futures, lengths = [], []
        for dev, off, at, length in (self._runs(ids) if ids.size else []):
            f = self._files[dev]
            op = f.pread if what == "read" else f.pwrite
            futures.append(op(buf[at:at + length], length, off))
            lengths.append(length)
        h = _kvikio_future(futures, lengths, result, what)
        self.io.submitted(what, nbytes, h, "device" if t.is_cuda else "-")
        return h

    def read_async(self, ext: Extent, offset: int, out: torch.Tensor):
        return self._submit("read", ext, offset, out, out)

    def write_async(self, ext: Extent, offset: int, src: torch.Tensor):
        return self._submit("write", ext, offset, src, None)

    def data_path(self) -> str:
        d = self._kv.defaults
        return (f"kvikio {self._kv.__version__} CuFile pread/pwrite, compat mode {COMPAT_MODE} (POSIX + bounce "
                f"buffer, no GDS), {d.get('thread_pool_nthreads')} threads, task {d.get('task_size') >> 10} KiB")

    def sync(self) -> None:
        for f in self._files:  # KvikIO's writes go through the page cache in compat mode
            os.fdatasync(f.fileno())

    def close(self) -> None:
        for f in self._files:
            f.close()
        self._files = []
