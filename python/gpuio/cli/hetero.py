"""`gpuio demo --hetero` (and `examples/rgat_igbh.py`): GIDS's RGAT experiment on an IGBH-shaped graph, see
gpuio.gnn.hetero_job. Runs unchanged under `torchrun --nproc_per_node N` (data parallel)."""
from __future__ import annotations

import typer


def _ints(text: str, option: str) -> tuple:
    try:
        return tuple(int(f) for f in text.split(","))
    except ValueError:
        raise typer.BadParameter(f"{option} must be comma-separated ints, got {text!r}") from None


def demo_hetero(root: str = typer.Option("gpuio-igbh", help="dataset directory (generated there if absent)"),
                igbh: str = typer.Option("", help="import a real IGBH `processed` directory into --root"),
                papers: int = typer.Option(0, help="papers to generate (0: 4000 on CPU, 200000 with CUDA); "
                                                   "3.13 feature rows and ~55 edges per paper"),
                features: int = typer.Option(0, help="feature columns (0: 128 on CPU, 1024 with CUDA)"),
                dtype: str = typer.Option("float32", help="feature dtype: float32 or float16"),
                edge_scale: float = typer.Option(1.0, help="multiplies every mean degree"),
                gen_device: str = typer.Option("cpu", help="where feature noise is drawn (cuda: faster)"),
                backends: str = typer.Option("gpuio,memory", help="feature sources: gpuio, mmap, memory"),
                structure: str = typer.Option("file", help="file (CSC read through gpuio) or memory"),
                steps: int = typer.Option(100, help="training steps timed (GIDS: 100)"),
                batch_size: int = typer.Option(0, help="seed papers per step (0: 256 on CPU, 1024 with CUDA)"),
                fanouts: str = typer.Option("10,5", help="neighbours sampled per hop and relation"),
                gpu_cache_fraction: float = typer.Option(0.1, help="device cache per type, share of its table"),
                host_fraction: float = typer.Option(0.2, help="constant host buffer, share of each type's rows"),
                struct_cache_mb: int = typer.Option(64, help="page cache per relation file, MiB"),
                eval_nodes: int = typer.Option(0, help="test papers evaluated (0: 1000 CPU, 20000 CUDA)"),
                inline: bool = typer.Option(False, "--inline", help="load on the training thread (no loader thread)"),
                belady: bool = typer.Option(False, "--belady", help="record the row trace; bytes read vs MIN"),
                timing: bool = typer.Option(False, "--timing", help="also time loading alone and compute alone"),
                device: str = typer.Option("", help="cuda or cpu (default: cuda when available)"),
                seed: int = typer.Option(0, help="seed for data, sampling and model"),
                save_params: str = typer.Option("", help="save final parameters here (.rank<r> per rank)"),
                json_out: str = typer.Option("", "--json", help="write config and results as JSON"),
                generate_only: bool = typer.Option(False, "--generate-only",
                                                   help="write the dataset and stop")) -> None:
    from gpuio.gnn.hetero_job import HeteroConfig, run
    try:
        cfg = HeteroConfig(root=root, igbh=igbh, papers=papers, features=features, dtype=dtype,
                           edge_scale=edge_scale, gen_device=gen_device, backends=tuple(backends.split(",")),
                           structure=structure,
                           steps=steps, batch_size=batch_size, fanouts=_ints(fanouts, "--fanouts"),
                           gpu_cache_fraction=gpu_cache_fraction, host_fraction=host_fraction,
                           struct_cache_mb=struct_cache_mb, eval_nodes=eval_nodes, background=not inline,
                           belady=belady, timing=timing, device=device, seed=seed, save_params=save_params,
                           json_out=json_out, generate_only=generate_only).resolve()
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    run(cfg)
