"""The GNN demo (`gpuio demo`): GraphSAGE (or GCN/GAT) node classification on a power-law graph whose
features live in a file in the current directory, LARGER THAN THE MEMORY THE RUN IS GIVEN: gpuio's story.

Three feature sources, in one run, with the same sampler seed, batches and model initialisation:
- memory: the whole table in RAM (the upper bound, and the reference the others must match; run first,
          before the memory limit);
- gpuio:  `gpuio.TableCache` (device page cache + hot host buffer + window + accumulator) over a
          `gpuio.TensorFile` read by the engine with O_DIRECT;
- mmap:   `np.load(mmap_mode="r")` + fancy indexing (the mmap loader GIDS compares against).
gpuio and mmap run inside a memory cgroup (gpuio_apps.bench.memlimit: v2 or v1; root) whose limit is the run's
own anonymous memory plus a page-cache budget of `memory_fraction` x the table (default 1/4: features 4x
larger than memory), caches dropped before each; where no cgroup can be made the demo says so and falls
back to evicting the file before each source (then the page cache may grow during an epoch). On the CPU
gpuio's own caches are host memory and come out of the same budget. Warm-up (CUDA context, cuBLAS, kernel
loading, the engine's GPU path) runs before anything is timed. Each source gets `time_cap_s`; one that runs
out stops after the batch in hand and its epoch time is extrapolated from the batches it did (said so).
`sample_workers` > 0 (`--sample-workers`) samples in that many worker processes over a host copy of the graph
while the main process gathers the features (GraphBolt's split; gpuio.loader): the same batches for every
source (each batch has its own generator), which on the CPU are also those of `sample_workers=0`; on a GPU
they are other draws than the GPU sampler's (the workers sample on the CPU). The workers are started outside
the memory cgroup (they hold no features; the limit bounds feature loading) by a forkserver, not by fork:
forked children share the main process's pages, and each page it then writes is copied into its own memory
(about 100 MiB over an epoch of the CPU demo: four times its memory budget).
The check: every batch's features are byte-identical across sources (an exact integer checksum); losses
are identical on the CPU; on a GPU PyG's scatter-add uses atomics, so losses agree only within rounding
(the demo prints the largest difference, mmap-vs-memory beside gpuio-vs-memory).
"""
from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from gpuio_apps.gnn.config import apply_machine_defaults

from gpuio.cache.page_cache import POLICIES
from gpuio_apps.gnn.models import MODELS

CPU_DEFAULTS = dict(nodes=400_000, edges=2_400_000, features=64, batch_size=256, epochs=2, batches=8,
                    time_cap_s=15.0, fanouts=(10, 5))
GPU_DEFAULTS = dict(nodes=2_000_000, edges=20_000_000, features=128, batch_size=1024, epochs=2, batches=12,
                    time_cap_s=40.0, fanouts=(25, 10))
BACKENDS = ("gpuio", "mmap", "memory")


@dataclass
class DemoConfig:
    model: str = "sage"
    nodes: int = 0  # 0: the CPU or GPU default
    edges: int = 0
    features: int = 0
    classes: int = 8
    batch_size: int = 0
    epochs: int = 0
    batches: int = 0  # seed batches per epoch (sets train_fraction unless that is given)
    train_fraction: float = 0.0
    fanouts: tuple = ()  # neighbours sampled per hop; (): (25, 10) on a GPU, (10, 5) on the CPU
    hidden: int = 64
    cache_fraction: float = 0.0  # device cache / table; 0: 1/4 on a GPU, 0.8 x the memory budget on the CPU
    host_fraction: float = 0.01  # rows in the constant host buffer, as a share of all rows
    memory_fraction: float = 0.25  # page-cache budget of gpuio and mmap, as a share of the table
    time_cap_s: float = 0.0  # per feature source (timed epochs); 0: the default
    policy: str = "clock"
    sample_workers: int = 0  # processes sampling the batches (0: the loader's thread samples)
    seed: int = 0
    workdir: str = "."
    backends: tuple = BACKENDS
    device: str = ""
    plot: bool = False
    defaults: dict = field(default_factory=dict)

    def resolve(self) -> "DemoConfig":
        apply_machine_defaults(self, CPU_DEFAULTS, GPU_DEFAULTS, BACKENDS)
        if self.model not in MODELS:
            raise ValueError(f"model {self.model!r} is not one of {', '.join(MODELS)}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy {self.policy!r} is not one of {', '.join(POLICIES)}")
        if not self.train_fraction:
            self.train_fraction = min(0.9, self.batches * self.batch_size / max(self.nodes, 1))
        if not 0 < self.train_fraction <= 1:
            raise ValueError(f"train_fraction must lie in (0, 1], got {self.train_fraction}")
        if not 0 < self.memory_fraction <= 1:
            raise ValueError(f"memory_fraction must lie in (0, 1], got {self.memory_fraction}")
        if not self.cache_fraction:
            self.cache_fraction = 0.25 if self.device.startswith("cuda") else 0.8 * self.memory_fraction
        if not 0 <= self.cache_fraction <= 1:
            raise ValueError(f"cache_fraction must lie in [0, 1], got {self.cache_fraction}")
        if isinstance(self.sample_workers, bool) or not isinstance(self.sample_workers, int) or self.sample_workers < 0:
            raise ValueError(f"sample_workers must be an int >= 0, got {self.sample_workers!r}")
        return self


def prepare_graph(cfg: DemoConfig, progress=None):
    """The graph and its feature file in cfg.workdir, regenerated only when the parameters changed."""
    from gpuio_apps.data import synthetic_graph
    from gpuio.graph import GraphData
    from gpuio.tensor import TensorFile
    base = os.path.join(cfg.workdir, "gpuio-demo")
    params = dict(nodes=cfg.nodes, edges=cfg.edges, features=cfg.features, classes=cfg.classes,
                  seed=cfg.seed, train_fraction=cfg.train_fraction, version=1)
    feat_path, meta_path, graph_path = base + "-features.npy", base + "-meta.json", base + "-graph.pt"
    try:
        with open(meta_path) as f:
            same = json.load(f) == params
        if same:
            g = torch.load(graph_path)
            return GraphData(g["edge_index"], g["y"], cfg.classes, g["train"], g["val"], g["test"],
                             TensorFile.open(feat_path), name="rmat"), feat_path, True
    except (OSError, ValueError, KeyError):
        pass
    split = (cfg.train_fraction, 0.05, min(0.2, 1 - cfg.train_fraction - 0.05))
    data = synthetic_graph(feat_path, cfg.nodes, cfg.edges, cfg.features, cfg.classes, cfg.seed,
                           split=split, progress=progress, overwrite=True)  # parameters changed: regenerate
    torch.save(dict(edge_index=data.edge_index, y=data.y, train=data.train_idx, val=data.val_idx,
                    test=data.test_idx), graph_path)
    with open(meta_path, "w") as f:
        json.dump(params, f)
    return data, feat_path, False


class Prepared:
    """What every source shares, built once outside the timed region: the sampler's CSC on the device and
    the hot-row scores (building the CSC sorts every edge: seconds at 20 M edges)."""

    def __init__(self, cfg: DemoConfig, data, feat_path: str):
        from gpuio.graph.hot import degree_scores
        from gpuio.graph.csc import csc_from_edge_index
        self.cfg, self.data, self.feat_path = cfg, data, feat_path
        host = csc_from_edge_index(data.edge_index, data.num_nodes)
        self.graph = host.to(cfg.device)
        # sampling workers sample a host copy (GraphBolt's split: CPU sampling in the workers)
        self.sample_graph = host if cfg.sample_workers else self.graph
        if cfg.sample_workers:  # the forkserver's children start with torch and the sampler imported
            import multiprocessing
            multiprocessing.get_context("forkserver").set_forkserver_preload(["gpuio.loader", "gpuio.pyg"])
        self.hot_scores = degree_scores(self.graph)
        self.limit = None  # the memory cgroup the sources run in, once entered (see run)

    def loader(self, source, idx, shuffle=True, seed_offset=0):
        """A NodeBatchLoader over `source`; with sample_workers its processes are started on the first
        iteration and stopped by its close()."""
        from gpuio.loader import NodeBatchLoader
        from gpuio.pyg import NeighborSampler
        cfg = self.cfg
        sampler = NeighborSampler(self.sample_graph, list(cfg.fanouts), seed=cfg.seed + seed_offset,
                                  num_nodes=self.data.num_nodes)
        loader = NodeBatchLoader(sampler, source, idx, cfg.batch_size, labels=self.data.y, seed=cfg.seed,
                                 shuffle=shuffle, device=cfg.device, sample_workers=cfg.sample_workers,
                                 start_method="forkserver")
        if cfg.sample_workers:  # started (and waited for) here, not in the timed epoch
            with self.limit.outside() if self.limit is not None else contextlib.nullcontext():
                loader.start_workers()  # they hold no features: not charged to the features' memory limit
        return loader

    def source(self, backend: str):
        from gpuio.cache import TableCache, InMemoryRows
        from gpuio_apps.baselines import MemmapRows
        cfg = self.cfg
        if backend == "memory":
            return InMemoryRows(torch.from_numpy(np.load(self.feat_path)))
        if backend == "mmap":  # readahead off: the kinder mmap baseline out of core (MemmapRows says why)
            return MemmapRows(self.feat_path, random_access=True)
        tf = self.data.features
        return TableCache(tf, gpu_cache_bytes=int(tf.nbytes * cfg.cache_fraction),
                            host_cache_rows=int(self.data.num_nodes * cfg.host_fraction),
                            hot_scores=self.hot_scores, window=8, accumulate=True, policy=cfg.policy,
                            device=cfg.device)


_SAME_SIZE_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def checksum(x: torch.Tensor) -> int:
    """Exact, order-independent fingerprint of a batch's bytes: the integer sum of its elements read as integers
    of their own size (float32 as int32, float16 as int16, ...)."""
    return int(x.contiguous().view(_SAME_SIZE_INT[x.element_size()]).sum(dtype=torch.int64))


def train_on_zeros(prep: Prepared, batches: int = 2) -> None:
    """A few training steps on zero features (no file read): loads the model's, sampler's and optimizer's
    kernels, and inside a fresh memory cgroup leaves the run's anonymous peak as the group's peak."""
    from gpuio_apps.baselines import ZeroRows
    from gpuio_apps.gnn.train import make_model, train_epoch
    cfg = prep.cfg
    loader = prep.loader(ZeroRows(prep.data.features.shape, cfg.device),
                         prep.data.train_idx[: batches * cfg.batch_size])
    model = make_model(cfg.model, cfg.features, cfg.classes, cfg.hidden, cfg.seed, cfg.device)
    train_epoch(model, loader, torch.optim.Adam(model.parameters(), lr=0.01))
    loader.close()


def warm_up(prep: Prepared) -> None:
    """CUDA context, cuBLAS, the sampler's/model's/store's kernels, the engine's GPU path: not timed."""
    train_on_zeros(prep)
    store = prep.source("gpuio")
    float(store.gather(torch.arange(min(1024, prep.data.num_nodes), device=prep.cfg.device)).sum())


def run_backend(backend: str, prep: Prepared, progress=None) -> dict:
    from gpuio_apps.gnn.train import accuracy, make_model, train_epoch
    cfg = prep.cfg
    source = prep.source(backend)
    loader = prep.loader(source, prep.data.train_idx)
    model = make_model(cfg.model, cfg.features, cfg.classes, cfg.hidden, cfg.seed, cfg.device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    task = progress.add_task(f"{backend:>6}", total=cfg.epochs * len(loader)) if progress else None
    sums: list[int] = []

    def on_batch(batch):
        sums.append(checksum(batch.x))
        if progress:
            progress.advance(task)

    deadline = time.perf_counter() + cfg.time_cap_s
    epochs, losses, capped = [], [], False
    for _ in range(cfg.epochs):
        r = train_epoch(model, loader, opt, on_batch=on_batch, deadline=deadline)
        losses += r.pop("losses")
        epochs.append(r)
        if r["batches"] < len(loader):
            capped = True
            break
    loader.close()
    full = len(loader)
    # s/epoch: measured epochs; a capped one extrapolated from its batches (whole epochs first when any).
    whole = [e for e in epochs if e["batches"] == full]
    per_epoch = (lambda k: float(np.mean([e[k] for e in whole])) if whole
                 else float(sum(e[k] for e in epochs) / max(sum(e["batches"] for e in epochs), 1) * full))
    out = dict(backend=backend, losses=losses, sums=sums, capped=capped,
               batches_run=sum(e["batches"] for e in epochs), batches_per_epoch=full,
               **{k: per_epoch(k) for k in ("epoch_s", "compute_s", "feature_s", "stall_s", "sample_s")})
    out["feature_share"] = out["feature_s"] / max(out["epoch_s"], 1e-9)
    test = prep.loader(source, prep.data.test_idx[: 4 * cfg.batch_size], shuffle=False, seed_offset=1)
    out["test_acc"] = accuracy(model, test) if not capped else float("nan")
    test.close()
    if hasattr(source, "stats"):
        s = source.stats()
        out.update(host_hit_rate=s["host_hit_rate"], gpu_hit_rate=s["gpu_hit_rate"],
                   device_rate=s["device_rate"], data_path=s.get("storage", {}).get("engine", {}).get("data_path", ""))
    return out


def run(cfg: DemoConfig, console=None) -> list[dict]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from gpuio_apps.bench.memlimit import MemoryLimit, drop_file_cache
    from gpuio_apps.gnn import demo_report
    cfg = cfg.resolve()
    console = console or Console()
    torch.set_num_threads(min(torch.get_num_threads(), os.cpu_count() or 1))
    console.print(f"[bold]gpuio demo[/]: {cfg.model.upper()} on an R-MAT graph, {cfg.nodes:,} nodes, "
                  f"{cfg.edges:,} edges, {cfg.features} features, fan-outs {tuple(cfg.fanouts)}, "
                  f"{cfg.epochs} epochs of {cfg.batches} batches, device {cfg.device}"
                  + (f", sampling in {cfg.sample_workers} worker processes" if cfg.sample_workers else ""))
    cols = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    results, regime = [], ""
    with Progress(*cols, console=console, transient=False) as progress:
        t = progress.add_task("  data", total=cfg.nodes)
        data, feat_path, reused = prepare_graph(cfg, lambda done, total: progress.update(t, completed=done))
        progress.update(t, completed=cfg.nodes)
        prep = Prepared(cfg, data, feat_path)
        warm_up(prep)
        table = data.features.nbytes
        budget = int(table * cfg.memory_fraction)
        if "memory" in cfg.backends:  # before the limit: it holds the whole table
            results.append(run_backend("memory", prep, progress))
        limited = [b for b in cfg.backends if b != "memory"]
        lim = MemoryLimit.enter("gpuio-demo") if limited else None
        try:
            if lim is not None:  # the fresh group's peak after training on zeros = the run's own memory
                # (often 0: the memory run warmed the allocator's heap before the group existed, so the run's own
                # pages were charged elsewhere; pages it adds later, NumPy's 2 MiB huge pages among them, are
                # charged here: the headroom covers them. 16 MiB saw the CPU demo killed in 1 run of 3-5.)
                # sampling workers hold no features: they are started outside the group, so the limit bounds
                # what it is meant to (the feature loading); sampling in the main process is charged here and
                # counted in the run's own memory below
                prep.limit = lim
                train_on_zeros(prep)
                own, headroom = lim.peak_bytes() or lim.anon_bytes(), 32 << 20
                # receiving samples from workers costs the main process buffers a 2-batch warm-up does not
                # reach (measured: ~15 MiB over an epoch of the CPU demo)
                headroom += (32 << 20) if cfg.sample_workers else 0
                lim.set(own + budget + headroom)
                regime = (f"features {table / 2**20:.0f} MiB, memory given {budget / 2**20:.0f} MiB "
                          f"({lim.describe()} = the run's own peak {own / 2**20:.0f} MiB + those "
                          f"{budget / 2**20:.0f} MiB + {headroom >> 20} MiB headroom)")
            elif limited:
                regime = (f"features {table / 2**20:.0f} MiB; NO memory limit ({MemoryLimit.why}; run as root for "
                          f"a cgroup): the file is evicted before each source, but the page cache may then hold "
                          f"up to all of it during an epoch")
            for b in limited:
                dropped = drop_file_cache(feat_path)
                r = run_backend(b, prep, progress)
                r["cache_note"] = dropped
                if lim is not None:
                    r["cgroup_peak"] = lim.peak_bytes()
                    r["cgroup_cache"] = lim.cache_bytes()
                results.append(r)
        finally:
            if lim is not None:
                lim.leave()
    data.features.close()
    console.print(f"features: {feat_path} ({'reused' if reused else 'written'}); {regime}")
    demo_report.print_table(results, console)
    demo_report.print_checks(results, cfg, console)
    demo_report.print_headline(results, cfg, console)
    if cfg.plot:
        path = demo_report.plot(results, os.path.join(cfg.workdir, "gpuio-demo.png"))
        console.print(f"plot: {path}")
    return results
