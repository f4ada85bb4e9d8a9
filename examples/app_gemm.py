"""Out-of-core GEMM: A, B and C as tiles on a gpuio store, tiles prefetched while torch.matmul runs.

    python3 examples/app_gemm.py --size tiny --device cpu
    python3 examples/app_gemm.py --size large --device cuda --cold --store /data/a.bin,/data/b.bin   # RAID-0

The code is the library module gpuio_apps.papers.gemm (its docstring says what is measured and checked);
--help lists the options.
"""
import sys

from gpuio_apps.papers.gemm import main

if __name__ == "__main__":
    sys.exit(main())
