"""`gpuio demo`: the GNN training demo (see gpuio.gnn.demo) with defaults sized for the machine. Every
option is checked here, before the graph is generated (see _check.py)."""
from __future__ import annotations

import typer

from . import _check


def demo(model: str = typer.Option("sage", help="sage (GraphSAGE), gcn or gat"),
         nodes: int = typer.Option(0, help="graph nodes (0: 20k on CPU, 1M with CUDA)"),
         edges: int = typer.Option(0, help="R-MAT edges before symmetrising (0: 6 or 10 per node)"),
         features: int = typer.Option(0, help="feature columns (0: 64 on CPU, 128 with CUDA)"),
         epochs: int = typer.Option(0, help="training epochs (0: 2 on CPU, 3 with CUDA)"),
         batch_size: int = typer.Option(0, help="seed nodes per batch (0: 512 on CPU, 1024 with CUDA)"),
         fanouts: str = typer.Option("25,10", help="neighbours sampled per hop (-1: all)"),
         cache_fraction: float = typer.Option(0.25, help="device cache size as a share of the feature table, 0..1"),
         host_fraction: float = typer.Option(0.02, help="hot rows held in host memory, share of all rows, 0..1"),
         policy: str = typer.Option("clock", help="cache eviction policy: clock, lru, fifo, random"),
         backends: str = typer.Option("gpuio,mmap,memory", help="feature sources to compare"),
         device: str = typer.Option("", help="cuda or cpu (default: cuda when available)"),
         seed: int = typer.Option(0, help="seed for graph, sampling and model"),
         workdir: str = typer.Option(".", help="where the feature file goes (an existing, writable folder)"),
         plot: bool = typer.Option(False, "--plot", help="save gpuio-demo.png (epoch time split)")) -> None:
    for option, value in (("--nodes", nodes), ("--edges", edges), ("--features", features),
                          ("--epochs", epochs), ("--batch-size", batch_size)):
        _check.int_at_least(option, value, 0, " (0: the machine's default)")
    _check.int_at_least("--seed", seed, 0)
    fan = _check.int_list("--fanouts", fanouts, lambda v: v >= 1 or v == -1, "integers >= 1 (or -1: all)")
    _check.number_in("--cache-fraction", cache_fraction, 0.0, 1.0)
    _check.number_in("--host-fraction", host_fraction, 0.0, 1.0)
    _check.output_dir("--workdir", workdir)
    _check.need("torch", "gpuio demo")
    _check.need("torch_geometric", "gpuio demo")
    if plot:
        _check.need("matplotlib", "gpuio demo --plot")

    from gpuio.cache import POLICIES
    from gpuio.gnn.demo import BACKENDS, DemoConfig, run
    from gpuio.gnn.models import MODELS
    _check.choice("--model", model, MODELS)
    _check.choice("--policy", policy, POLICIES)
    chosen = _check.choices("--backends", backends, BACKENDS)
    _check.device("--device", device)
    run(DemoConfig(model=model, nodes=nodes, edges=edges, features=features, epochs=epochs,
                   batch_size=batch_size, fanouts=fan, cache_fraction=cache_fraction,
                   host_fraction=host_fraction, policy=policy, backends=chosen,
                   device=device, seed=seed, workdir=workdir, plot=plot))
