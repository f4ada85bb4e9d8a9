"""`gpuio demo`: the GNN training demo (see gpuio_apps.gnn.demo) with defaults sized for the machine. Every
option is checked here, before the graph is generated (see _check.py). `gpuio demo --hetero ...` is the
heterogeneous demo instead (gpuio_apps.cli.hetero, its own options; gpuio_apps.cli.main routes the line there)."""
from __future__ import annotations

import typer

from . import _check


def demo(model: str = typer.Option("sage", help="sage (GraphSAGE), gcn or gat"),
         nodes: int = typer.Option(0, help="graph nodes (0: 400k on CPU, 2M with CUDA)"),
         edges: int = typer.Option(0, help="R-MAT edges before symmetrising (0: 6 or 10 per node)"),
         features: int = typer.Option(0, help="feature columns (0: 64 on CPU, 128 with CUDA)"),
         epochs: int = typer.Option(0, help="timed training epochs (0: 2)"),
         batches: int = typer.Option(0, help="seed batches per epoch (0: 8 on CPU, 12 with CUDA)"),
         batch_size: int = typer.Option(0, help="seed nodes per batch (0: 256 on CPU, 1024 with CUDA)"),
         fanouts: str = typer.Option("", help="neighbours sampled per hop, -1: all (default: 25,10 with CUDA, "
                                              "10,5 on CPU)"),
         cache_fraction: float = typer.Option(0.0, help="device cache size as a share of the feature table, 0..1 "
                                                        "(0: 0.25 with CUDA; on the CPU 0.8 x memory-fraction)"),
         host_fraction: float = typer.Option(0.01, help="hot rows held in host memory, share of all rows, 0..1"),
         memory_fraction: float = typer.Option(0.25, help="memory given to gpuio and mmap (page cache, and on the "
                                                         "CPU gpuio's caches) as a share of the feature table, 0..1"),
         time_cap: float = typer.Option(0.0, help="seconds each feature source may train (0: 15 on CPU, 40 "
                                                  "with CUDA); a capped epoch is extrapolated, and says so"),
         policy: str = typer.Option("clock", help="cache eviction policy: clock, lru, fifo, random"),
         sample_workers: int = typer.Option(0, help="worker processes sampling the batches while the main "
                                                    "process gathers the features (0: a thread samples)"),
         backends: str = typer.Option("gpuio,mmap,memory", help="feature sources to compare"),
         device: str = typer.Option("", help="cuda or cpu (default: cuda when available)"),
         seed: int = typer.Option(0, help="seed for graph, sampling and model"),
         workdir: str = typer.Option(".", help="where the feature file goes (an existing, writable folder)"),
         plot: bool = typer.Option(False, "--plot", help="save gpuio-demo.png (epoch time split)"),
         hetero: bool = typer.Option(False, "--hetero", help="run the heterogeneous demo instead: RGAT on an "
                                                             "IGBH-shaped graph; `gpuio demo --hetero --help` "
                                                             "lists its options")) -> None:
    if hetero:  # only reached when this function is called directly, not through `gpuio` (which routes it)
        raise _check.InputError("--hetero: its options are not this command's; run `gpuio demo --hetero ...`")
    for option, value in (("--nodes", nodes), ("--edges", edges), ("--features", features),
                          ("--epochs", epochs), ("--batches", batches), ("--batch-size", batch_size)):
        _check.int_at_least(option, value, 0, " (0: the machine's default)")
    _check.int_at_least("--seed", seed, 0)
    _check.int_at_least("--sample-workers", sample_workers, 0)
    fan = (_check.int_list("--fanouts", fanouts, lambda v: v >= 1 or v == -1, "integers >= 1 (or -1: all)")
           if fanouts else ())
    _check.number_in("--cache-fraction", cache_fraction, 0.0, 1.0)
    _check.number_in("--host-fraction", host_fraction, 0.0, 1.0)
    _check.number_in("--memory-fraction", memory_fraction, 0.0, 1.0, low_open=True)
    _check.number_in("--time-cap", time_cap, 0.0, 86400.0)
    _check.output_dir("--workdir", workdir)
    _check.need("torch", "gpuio demo")
    _check.need("torch_geometric", "gpuio demo")
    if plot:
        _check.need("matplotlib", "gpuio demo --plot")

    from gpuio.cache import POLICIES
    from gpuio_apps.gnn.demo import BACKENDS, DemoConfig, run
    from gpuio_apps.gnn.models import MODELS
    _check.choice("--model", model, MODELS)
    _check.choice("--policy", policy, POLICIES)
    chosen = _check.choices("--backends", backends, BACKENDS)
    _check.device("--device", device)
    run(DemoConfig(model=model, nodes=nodes, edges=edges, features=features, epochs=epochs, batches=batches,
                   batch_size=batch_size, fanouts=fan, cache_fraction=cache_fraction,
                   host_fraction=host_fraction, memory_fraction=memory_fraction, time_cap_s=time_cap,
                   policy=policy, sample_workers=sample_workers, backends=chosen, device=device, seed=seed, workdir=workdir, plot=plot))
