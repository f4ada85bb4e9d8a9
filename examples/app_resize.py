"""Bilinear image resize over real photographs stored as raw decoded tensors.

    python3 examples/app_resize.py --size tiny --device cpu
    python3 examples/app_resize.py --size large --device cuda --cold --store /data/a.bin,/data/b.bin   # RAID-0

The code is the library module gpuio_apps.papers.resize (its docstring says what is measured and checked);
--help lists the options.
"""
import sys

from gpuio_apps.papers.resize import main

if __name__ == "__main__":
    sys.exit(main())
