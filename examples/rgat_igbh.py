"""RGAT on an IGBH-shaped heterogeneous graph (GIDS's experiment): features, and by default the graph
structure, read through gpuio; N steps timed, accuracy reported. One process:
    python examples/rgat_igbh.py --papers 20000 --backends gpuio,mmap,memory
Data parallel, any number of ranks (NCCL on GPUs, gloo on CPU):
    torchrun --nproc_per_node 2 examples/rgat_igbh.py --papers 20000
`python examples/rgat_igbh.py --help` lists the options; the same command as `gpuio demo --hetero` (same
checks, one-line errors)."""
import sys

from gpuio_apps.cli import main

if __name__ == "__main__":
    main(["demo", "--hetero", *sys.argv[1:]])
