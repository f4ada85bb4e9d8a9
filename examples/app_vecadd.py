"""Vector add of two float64 vectors on storage in 1 MiB batches, result written back.

    python3 examples/app_vecadd.py --size tiny --device cpu
    python3 examples/app_vecadd.py --size large --device cuda --cold --store /data/a.bin,/data/b.bin   # RAID-0

The code is the library module gpuio_apps.papers.vecadd (its docstring says what is measured and checked);
--help lists the options.
"""
import sys

from gpuio_apps.papers.vecadd import main

if __name__ == "__main__":
    sys.exit(main())
