"""`gpuio info`: prints gpuio.info() (gpuio/sysinfo.py): io_uring features, the GPU, the GDS/cuFile mode,
and which data paths gpuio will take."""
from __future__ import annotations

import json

import typer



def info(json_out: bool = typer.Option(False, "--json", help="Print JSON instead of text.")) -> None:
    from gpuio.sysinfo import info as collect
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
