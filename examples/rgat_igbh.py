"""RGAT on an IGBH-shaped heterogeneous graph (GIDS's experiment): features, and by default the graph
structure, read through gpuio; N steps timed, accuracy reported. One process:
    python examples/rgat_igbh.py --papers 20000 --backends gpuio,mmap,memory
Data parallel, any number of ranks (NCCL on GPUs, gloo on CPU):
    torchrun --nproc_per_node 2 examples/rgat_igbh.py --papers 20000
`python examples/rgat_igbh.py --help` lists the options; same as `gpuio demo --hetero`."""
import typer

from gpuio.cli.hetero import demo_hetero

if __name__ == "__main__":
    typer.run(demo_hetero)
