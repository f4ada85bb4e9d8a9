"""`gpuio demo`: the GNN training demo (see gpuio.gnn.demo) with defaults sized for the machine."""
from __future__ import annotations

import typer


def demo(model: str = typer.Option("sage", help="sage (GraphSAGE), gcn or gat"),
         nodes: int = typer.Option(0, help="graph nodes (0: 20k on CPU, 1M with CUDA)"),
         edges: int = typer.Option(0, help="R-MAT edges before symmetrising (0: 6 or 10 per node)"),
         features: int = typer.Option(0, help="feature columns (0: 64 on CPU, 128 with CUDA)"),
         epochs: int = typer.Option(0, help="timed training epochs (0: 2)"),
         batches: int = typer.Option(0, help="seed batches per epoch (0: 8 on CPU, 12 with CUDA)"),
         batch_size: int = typer.Option(0, help="seed nodes per batch (0: 512 on CPU, 1024 with CUDA)"),
         fanouts: str = typer.Option("", help="neighbours sampled per hop (default: 25,10 with CUDA, 10,5 on CPU)"),
         cache_fraction: float = typer.Option(0.0, help="device cache size as a share of the feature table "
                                                        "(0: 0.25 with CUDA; on the CPU 0.8 x memory-fraction)"),
         host_fraction: float = typer.Option(0.01, help="hot rows held in host memory, share of all rows"),
         memory_fraction: float = typer.Option(0.25, help="memory given to gpuio and mmap (page cache, and on the "
                                                         "CPU gpuio's caches) as a share of the feature table"),
         time_cap: float = typer.Option(0.0, help="seconds each feature source may train (0: 20 on CPU, 40 "
                                                  "with CUDA); a capped epoch is extrapolated, and says so"),
         policy: str = typer.Option("clock", help="cache eviction policy: clock, lru, fifo, random"),
         backends: str = typer.Option("gpuio,mmap,memory", help="feature sources to compare"),
         device: str = typer.Option("", help="cuda or cpu (default: cuda when available)"),
         seed: int = typer.Option(0, help="seed for graph, sampling and model"),
         workdir: str = typer.Option(".", help="where the feature file goes"),
         plot: bool = typer.Option(False, "--plot", help="save gpuio-demo.png (epoch time split)")) -> None:
    from gpuio.gnn.demo import DemoConfig, run
    try:
        fan = tuple(int(f) for f in fanouts.split(",")) if fanouts else ()
    except ValueError:
        raise typer.BadParameter(f"fanouts must be comma-separated ints, got {fanouts!r}") from None
    run(DemoConfig(model=model, nodes=nodes, edges=edges, features=features, epochs=epochs, batches=batches,
                   batch_size=batch_size, fanouts=fan, cache_fraction=cache_fraction,
                   host_fraction=host_fraction, memory_fraction=memory_fraction, time_cap_s=time_cap,
                   policy=policy, backends=tuple(backends.split(",")),
                   device=device, seed=seed, workdir=workdir, plot=plot))
