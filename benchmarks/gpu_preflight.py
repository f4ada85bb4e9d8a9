"""What a GPU call's applications will find (scripts/gpu.sh apps|graph, the preflight step): where gpuio was
imported from and whether its CUDA layer is built, torch and the GPU, the optional packages the applications use,
KvikIO (the GEMM's second baseline; its wheels in /tmp/whl-site), the CPUs and the free space of the work folder.

    python benchmarks/gpu_preflight.py [--work DIR]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys

OPTIONAL = ("transformers", "safetensors", "skimage", "matplotlib", "scipy", "PIL")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default=".", help="the work folder whose free space is printed")
    a = ap.parse_args(argv)
    if not os.path.isdir(a.work):
        ap.error(f"--work {a.work!r}: not a folder")
    import torch

    import gpuio
    from gpuio import gpu

    cuda = torch.cuda.is_available()
    print("gpuio", gpuio.__file__, "cuda_built", gpu.cuda_built(), "| torch", torch.__version__, "cuda", cuda,
          torch.cuda.get_device_name(0) if cuda else "-")
    for m in OPTIONAL:
        try:
            print(m, __import__(m).__version__)
        except Exception as e:  # a missing or broken optional package is reported, not fatal
            print(m, "MISSING:", e)
    if "/tmp/whl-site" not in sys.path:
        sys.path.append("/tmp/whl-site")  # where scripts/gpu.sh installs the carried wheels
    from gpuio_apps.papers.kvikio_store import load_kvikio

    try:
        print("kvikio", load_kvikio().__version__, "(compat mode ON)")
    except ImportError as e:
        print("kvikio MISSING:", e)
    print("cpus", os.cpu_count(), "| free on", a.work + ":", shutil.disk_usage(a.work).free // 2**30, "GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
