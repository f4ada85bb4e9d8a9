"""`gpuio info`: what this platform offers — io_uring features (probed with a tiny engine), the GPU, the
GDS/cuFile mode, and which data paths gpuio will take."""
from __future__ import annotations

import json
import os
import platform
import tempfile

import typer

RBD_MISSING = "not built (librbd-dev/librados-dev absent at build time)"


def _uring_probe() -> dict:
    import gpuio

    with tempfile.TemporaryDirectory(dir=os.getcwd() if os.access(os.getcwd(), os.W_OK) else None) as d:
        path = os.path.join(d, "probe.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(1 << 20))
        res = {}
        for direct in (True, False):
            try:
                with gpuio.Engine(path, backend="uring", workers=1, direct=direct) as eng:
                    s = eng.stats()
                    res["direct" if direct else "buffered"] = s["backend"]
            except (OSError, ValueError) as e:
                res["direct" if direct else "buffered"] = f"unavailable: {e}"
        return res


def collect() -> dict:
    from gpuio import _core, gpu

    r = {"kernel": platform.release(), "io_uring": _uring_probe(), "cuda_layer_built": bool(_core.cuda_built)}
    r["rbd_backend"] = "built" if getattr(_core, "rbd_built", False) else RBD_MISSING
    p = gpu.probe()
    r["gpu"] = p
    r["gds"] = gpu.gds_status()
    has_gpu = r["cuda_layer_built"] and p.get("count", 0) > 0
    r["data_paths"] = {
        "host": "uring+direct (O_DIRECT into aligned host buffers), uring+staging otherwise",
        "gpu": ("uring+staging->gpu: SSD -> pinned staging (io_uring fixed buffers, CUDA-mapped) -> GPU by copy "
                "engine; copy method chosen by measurement at start" if has_gpu
                else f"none: {p.get('error') or 'no GPU'}"),
        "cufile-p2p": "used" if r["gds"]["p2p"] else f"not used: {r['gds']['reason']}",
    }
    if has_gpu:
        r["stream_wait_value_selftest"] = gpu.stream_wait_selftest()
    return r


def info(json_out: bool = typer.Option(False, "--json", help="Print JSON instead of text.")) -> None:
    r = collect()
    if json_out:
        print(json.dumps(r, indent=1))
        return
    print(f"kernel           {r['kernel']}")
    for k, v in r["io_uring"].items():
        print(f"io_uring {k:8s} {v}")
    g = r["gpu"]
    print(f"CUDA layer       {'built' if r['cuda_layer_built'] else 'not built'}")
    print(f"rbd backend      {r['rbd_backend']} (Ceph volumes: gpuio volume, gpuio cluster)")
    print(f"GPU              {g.get('name') or '-'} (count {g.get('count', 0)}{', ' + g['error'] if g.get('error') else ''})")
    print(f"GDS / cuFile     {r['gds']['mode']}: {r['gds']['reason']}")
    if "stream_wait_value_selftest" in r:
        print(f"cuStreamWaitValue32 self-test: {r['stream_wait_value_selftest']}")
    for k, v in r["data_paths"].items():
        print(f"data path {k:6s} {v}")
