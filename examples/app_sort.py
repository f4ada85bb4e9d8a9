"""External sort of int32 keys in a memory budget: sorted runs, then a streamed k-way merge.

    python3 examples/app_sort.py --size tiny --device cpu
    python3 examples/app_sort.py --size large --device cuda --cold --store /data/a.bin,/data/b.bin   # RAID-0

The code is the library module gpuio_apps.papers.sort (its docstring says what is measured and checked);
--help lists the options.
"""
import sys

from gpuio_apps.papers.sort import main

if __name__ == "__main__":
    sys.exit(main())
