"""gpuio.info(): what this platform offers — io_uring features (probed with a tiny engine), the GPU, the
GDS/cuFile mode, and which data paths gpuio will take. `gpuio info` prints this dict."""
from __future__ import annotations

import os
import platform
import tempfile


def _uring_probe() -> dict:
    from gpuio.engine import Engine

    with tempfile.TemporaryDirectory(dir=os.getcwd() if os.access(os.getcwd(), os.W_OK) else None) as d:
        path = os.path.join(d, "probe.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(1 << 20))
        res = {}
        for direct in (True, False):
            try:
                with Engine(path, backend="uring", workers=1, direct=direct) as eng:
                    s = eng.stats()
                    res["direct" if direct else "buffered"] = s["backend"]
            except (OSError, ValueError) as e:
                res["direct" if direct else "buffered"] = f"unavailable: {e}"
        return res


def _gpu_report(p: dict) -> dict:
    """gpu.probe()'s report; where no GPU driver is loaded at all, its error says so: CUDA's own word for a
    missing driver is cudaErrorInsufficientDriver, "driver version is insufficient", which sends the reader to
    upgrade a driver that is not there."""
    if p.get("count", 0) == 0 and not p.get("driver_version") and not os.path.exists("/proc/driver/nvidia/version"):
        p = dict(p, error="no NVIDIA driver is loaded (/proc/driver/nvidia/version is missing), so there is no GPU "
                          "to use")
    return p


def info() -> dict:
    """The platform report (keys: kernel, io_uring, cuda_layer_built, rbd_backend, gpu, gds, data_paths, and
    stream_wait_value_selftest where a GPU is usable). Probes with a 1 MiB temporary file, removed again."""
    from gpuio import _core, gpu

    r = {"kernel": platform.release(), "io_uring": _uring_probe(), "cuda_layer_built": bool(_core.cuda_built)}
    # "available", or why not: the Ceph library missing on this host, or a build without the backend
    r["rbd_backend"] = _core.rbd_unavailable() or "available"
    p = _gpu_report(gpu.probe())
    r["gpu"] = p
    r["gds"] = gpu.gds_status()
    has_gpu = r["cuda_layer_built"] and p.get("count", 0) > 0
    r["data_paths"] = {
        "host": "uring+direct (O_DIRECT into aligned host buffers), uring+staging otherwise",
        "gpu": ("stream-ordered reads/writes: uring -> pinned bounce slots -> GPU by one copy per chunk on the "
                "caller's stream (uring+...->bounce->gpu); device API (kernels): uring+staging->gpu, copy method "
                "chosen by measurement at start" if has_gpu
                else f"none: {p.get('error') or 'no GPU'}"),
        "cufile-p2p": "used" if r["gds"]["p2p"] else f"not used: {r['gds']['reason']}",
    }
    if has_gpu:
        r["stream_wait_value_selftest"] = gpu.stream_wait_selftest()
    return r

__all__ = ["info"]
