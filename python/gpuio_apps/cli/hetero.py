"""`gpuio demo --hetero` (and `examples/rgat_igbh.py`): GIDS's RGAT experiment on an IGBH-shaped graph, see
gpuio_apps.gnn.hetero_job, told as `gpuio demo` tells its own: in-memory, gpuio and mmap features, the latter two
out of core (a quarter of the features' size in memory), one table, the checks, what limits each run, one
headline; `--judge` adds the full report with the judged lines (each point with its goal). Runs under `torchrun
--nproc_per_node N` (data parallel). Every option is checked here, before the dataset is generated or opened
(see _check.py)."""
from __future__ import annotations

import os

import typer

from . import _check


def _dataset_dir(option: str, path: str) -> str:
    """An existing directory, or one that can be made in an existing, writable folder."""
    if os.path.exists(path):
        if not os.path.isdir(path):
            _check.fail(option, path, "not a directory")
        return path
    _check.output_dir(option, os.path.dirname(os.path.abspath(path)))
    return path


def demo_hetero(root: str = typer.Option("gpuio-igbh", help="dataset directory (generated there if absent)"),
                igbh: str = typer.Option("", help="import a real IGBH `processed` directory into --root"),
                papers: int = typer.Option(0, help="papers to generate (0: 86000 on CPU, 200000 with CUDA); "
                                                   "3.13 feature rows and ~55 edges per paper"),
                features: int = typer.Option(0, help="feature columns (0: 128 on CPU, 1024 with CUDA)"),
                dtype: str = typer.Option("float32", help="feature dtype: float32 or float16"),
                edge_scale: float = typer.Option(1.0, help="multiplies every mean degree"),
                gen_device: str = typer.Option("", help="where feature noise is drawn: cpu or cuda (faster; default: "
                                                        "the training device)"),
                backends: str = typer.Option("memory,gpuio,mmap", help="feature sources: memory, gpuio, mmap"),
                structure: str = typer.Option("file", help="file (CSC read through gpuio), memory, or file,memory: "
                                                           "both, same batches, throughput ratio printed"),
                steps: int = typer.Option(0, help="training steps timed, an epoch (0: 20 on CPU, 50 with CUDA; "
                                                  "GIDS: 100)"),
                batch_size: int = typer.Option(0, help="seed papers per step (0: 48 on CPU, 512 with CUDA; GIDS: "
                                                       "1024)"),
                fanouts: str = typer.Option("10,5", help="neighbours sampled per hop and relation"),
                memory_fraction: float = typer.Option(0.25, help="memory given to the gpuio and mmap runs (a memory "
                                                                 "cgroup, as root) as a share of the features; 0: no "
                                                                 "limit of its own (one already on the process is "
                                                                 "kept)"),
                gpu_cache_fraction: float = typer.Option(-1.0, help="device cache per type, share of its table (-1: "
                                                                    "0.1 with CUDA; on the CPU, host memory there, "
                                                                    "half of what the memory given leaves gpuio)"),
                host_fraction: float = typer.Option(-1.0, help="constant host buffer, share of each type's rows (-1: "
                                                               "what the memory given leaves gpuio, ~0.2 of the "
                                                               "rows with CUDA; 0.2 with no limit of its own)"),
                struct_cache_mb: int = typer.Option(-1, help="structure page cache in all, MiB, shared over the "
                                                             "relation files (pointers whole first, then the "
                                                             "neighbour lists by file size; 0: none; -1: "
                                                             "gpuio.graph's default, 64 per IGBH relation)"),
                window: int = typer.Option(32, help="batches each feature store's window buffer knows ahead "
                                                    "(GIDS's window buffer; larger reads fewer bytes)"),
                lookahead: int = typer.Option(29, help="batches announced to the windows before their rows are "
                                                       "submitted (at most --window minus 3)"),
                sample_threads: int = typer.Option(0, help="threads sampling the coming batches per rank "
                                                           "(0: gpuio.pyg.hetero_loader's default)"),
                eval_nodes: int = typer.Option(0, help="test papers evaluated (0: 128 on CPU, 2048 with CUDA)"),
                inline: bool = typer.Option(False, "--inline", help="load on the training thread (no loader thread)"),
                belady: bool = typer.Option(False, "--belady", help="record the row trace; bytes read vs MIN"),
                timing: bool = typer.Option(False, "--timing", help="gpuio: also time loading alone and compute alone"),
                time_cap: str = typer.Option("auto", help="seconds a run's steps may take: auto (8 on CPU, 30 with "
                                                          "CUDA), 0 no cap, S every run, or per label: gpuio=120,"
                                                          "mmap=50,gpuio/memory=40,load=90 (load: the --timing "
                                                          "pass); a capped run's epoch is extrapolated"),
                runs: str = typer.Option("", help="runs in order as backend/structure, e.g. gpuio/file,gpuio/memory,"
                                                  "mmap/file (overrides --backends and --structure); --timing and "
                                                  "--belady apply to the first gpuio run"),
                warmup_steps: int = typer.Option(-1, help="steps left out of the per-step comparisons of capped "
                                                          "runs (-1: a quarter of the common steps)"),
                budget: float = typer.Option(0.0, help="seconds the whole job may take (0: no limit): the time caps "
                                                       "shrink to fit, and SIGTERM still prints the report"),
                disk_mbs: float = typer.Option(0.0, help="the raw device's 4 KiB random-read rate in MB/s (e.g. "
                                                         "iobench): judges a disk-bound run against it"),
                device: str = typer.Option("", help="cuda or cpu (default: cuda when available)"),
                seed: int = typer.Option(0, help="seed for data, sampling and model"),
                deterministic: bool = typer.Option(True, "--deterministic/--no-deterministic",
                                                   help="deterministic CUDA kernels: runs on the same batches give "
                                                        "bit-equal losses (the CPU's are)"),
                judge: bool = typer.Option(False, "--judge", "--verbose",
                                           help="also print the full report: per-type hit rates, memory, throughput "
                                                "and the judged lines (each point with its goal)"),
                save_params: str = typer.Option("", help="save final parameters here (.rank<r> per rank)"),
                json_out: str = typer.Option("", "--json", help="write config and results as JSON"),
                generate_only: bool = typer.Option(False, "--generate-only",
                                                   help="write the dataset and stop")) -> None:
    for option, value in (("--papers", papers), ("--features", features), ("--batch-size", batch_size),
                          ("--eval-nodes", eval_nodes)):
        _check.int_at_least(option, value, 0, " (0: the machine's default)")
    _check.int_at_least("--steps", steps, 0, " (0: the machine's default)")
    _check.int_at_least("--seed", seed, 0)
    _check.int_at_least("--struct-cache-mb", struct_cache_mb, -1, " (MiB in all; -1: the default)")
    _check.int_at_least("--window", window, 1)
    _check.int_at_least("--lookahead", lookahead, 0)
    if lookahead > window - 3:
        _check.fail("--lookahead", lookahead, f"must be at most --window - 3 = {window - 3} (the window also "
                                                   "holds the 2 submitted batches and the one being served)")
    _check.int_at_least("--sample-threads", sample_threads, 0, " (0: the loader's default)")
    _check.choice("--dtype", dtype, ("float32", "float16"))
    _check.positive_number("--edge-scale", edge_scale)
    if gen_device:
        _check.choice("--gen-device", gen_device, ("cpu", "cuda"))
    if gen_device == "cuda":
        _check.device("--gen-device", "cuda")
    fan = _check.int_list("--fanouts", fanouts, lambda v: v >= 1 or v == -1, "integers >= 1 (or -1: all)")
    for option, value in (("--gpu-cache-fraction", gpu_cache_fraction), ("--host-fraction", host_fraction)):
        if value != -1:  # -1: sized from the memory given
            _check.number_in(option, value, 0.0, 1.0)
    _check.number_in("--memory-fraction", memory_fraction, 0.0, 1.0)
    from gpuio_apps.gnn.hetero_report import BACKENDS as RUN_BACKENDS, STRUCTURES as RUN_STRUCTURES, parse_caps
    items = [x.strip() for x in runs.split(",")] if runs else []
    for item in items:
        b, _, s = item.partition("/")
        if b not in RUN_BACKENDS or (s and s not in RUN_STRUCTURES):
            _check.fail("--runs", runs, f"{item!r} is not backend/structure (backends {', '.join(RUN_BACKENDS)}; "
                                        f"structures {', '.join(RUN_STRUCTURES)})")
    if len(set(items)) != len(items):
        _check.fail("--runs", runs, "each run must be named once")
    try:
        parse_caps("" if time_cap == "auto" else time_cap)
    except ValueError as e:
        _check.fail("--time-cap", time_cap, str(e))
    _check.int_at_least("--warmup-steps", warmup_steps, -1, " (-1: a quarter of the steps)")
    _check.number_in("--budget", budget, 0.0, 86400.0)
    _check.number_in("--disk-mbs", disk_mbs, 0.0, 1e6)
    _check.device("--device", device)
    _dataset_dir("--root", root)
    if igbh and not os.path.isdir(igbh):
        _check.fail("--igbh", igbh, "no such directory (an IGBH `processed` folder)")
    if json_out and os.environ.get("RANK", "0") == "0":  # only rank 0 writes it; ranks trying it at once raced
        _check.output_file("--json", json_out, force=True)  # replaced as before; never a device
    if save_params:
        _check.output_dir("--save-params", os.path.dirname(os.path.abspath(save_params)))
    _check.need("torch", "gpuio demo --hetero")
    _check.need("torch_geometric", "gpuio demo --hetero")

    from gpuio_apps.data.igbh import IGBHConfig
    from gpuio_apps.gnn.hetero_job import BACKENDS, STRUCTURES, HeteroConfig, run
    if struct_cache_mb < 0:
        struct_cache_mb = HeteroConfig.struct_cache_mb  # gpuio.graph.csc_file's default, through the config
    if papers and not igbh:
        _check.int_at_least("--papers", papers, 2 * IGBHConfig.classes, " (two per class)")
    chosen = _check.choices("--backends", backends, BACKENDS)
    structures = _check.choices("--structure", structure, STRUCTURES)
    try:
        cfg = HeteroConfig(root=root, igbh=igbh, papers=papers, features=features, dtype=dtype,
                           edge_scale=edge_scale, gen_device=gen_device, backends=chosen,
                           structure=",".join(structures),
                           steps=steps, batch_size=batch_size, fanouts=fan,
                           gpu_cache_fraction=gpu_cache_fraction, host_fraction=host_fraction,
                           struct_cache_mb=struct_cache_mb, window=window, lookahead=lookahead,
                           sample_threads=sample_threads, eval_nodes=eval_nodes, background=not inline,
                           belady=belady, timing=timing, time_cap=time_cap, runs=runs,
                           warmup_steps=warmup_steps, budget=budget, device=device, seed=seed,
                           deterministic=deterministic, disk_mbs=disk_mbs, save_params=save_params,
                           json_out=json_out, generate_only=generate_only, memory_fraction=memory_fraction,
                           judge=judge).resolve()
    except ValueError as e:  # a combination the single checks above cannot see
        raise _check.InputError(str(e)) from None
    run(cfg)
