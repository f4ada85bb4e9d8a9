"""The GNN demo (`gpuio demo`, `examples/gnn_train.py`): node classification on a power-law graph whose
features live in a file in the current directory, served three ways in one run with the same sampler
seed and model initialisation:

- gpuio:  `gpuio.FeatureStore` (device page cache + hot host buffer + window + accumulator) over a
          `gpuio.TensorFile` read by the engine;
- mmap:   `np.load(mmap_mode="r")` + fancy indexing (the mmap loader GIDS compares against);
- memory: the whole table in memory (upper bound).
Same seed -> the same batches and the same bytes -> the same losses; the demo checks and says so.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

CPU_DEFAULTS = dict(nodes=20_000, edges=120_000, features=64, batch_size=512, epochs=2, train_fraction=0.1)
GPU_DEFAULTS = dict(nodes=1_000_000, edges=10_000_000, features=128, batch_size=1024, epochs=3,
                    train_fraction=0.1)
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
    train_fraction: float = 0.0
    fanouts: tuple = (25, 10)
    hidden: int = 64
    cache_fraction: float = 0.25  # device cache = this share of the feature table
    host_fraction: float = 0.02  # rows in the constant host buffer, as a share of all rows
    policy: str = "clock"
    seed: int = 0
    workdir: str = "."
    backends: tuple = BACKENDS
    device: str = ""
    plot: bool = False
    defaults: dict = field(default_factory=dict)

    def resolve(self) -> "DemoConfig":
        if not self.device:
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        base = GPU_DEFAULTS if self.device.startswith("cuda") else CPU_DEFAULTS
        for k, v in base.items():
            if not getattr(self, k):
                setattr(self, k, v)
        bad = [b for b in self.backends if b not in BACKENDS]
        if bad:
            raise ValueError(f"unknown backend(s) {bad}; choose from {BACKENDS}")
        if not 0 < self.train_fraction <= 1:
            raise ValueError(f"train_fraction must lie in (0, 1], got {self.train_fraction}")
        return self


def prepare_graph(cfg: DemoConfig, progress=None):
    """The graph and its feature file in cfg.workdir, regenerated only when the parameters changed."""
    from gpuio.data import GraphData, synthetic_graph
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


def make_source(backend: str, data, feat_path: str, cfg: DemoConfig):
    from gpuio.cache import FeatureStore, InMemoryRows, MemmapRows
    if backend == "memory":
        return InMemoryRows(torch.from_numpy(np.load(feat_path)))
    if backend == "mmap":
        return MemmapRows(feat_path)
    tf = data.features
    table_bytes = tf.nbytes
    return FeatureStore(tf, gpu_cache_bytes=int(table_bytes * cfg.cache_fraction),
                        host_cache_rows=int(data.num_nodes * cfg.host_fraction), graph=data.edge_index,
                        window=8, accumulate=True, policy=cfg.policy, device=cfg.device)


def run_backend(backend, data, feat_path, cfg: DemoConfig, progress=None) -> dict:
    from gpuio.gnn.train import accuracy, make_model, train_epoch
    from gpuio.loader import NodeBatchLoader
    from gpuio.pyg import NeighborSampler
    source = make_source(backend, data, feat_path, cfg)
    sampler = NeighborSampler(data.edge_index, list(cfg.fanouts), seed=cfg.seed, num_nodes=data.num_nodes,
                              device=cfg.device)
    loader = NodeBatchLoader(sampler, source, data.train_idx, cfg.batch_size, labels=data.y, seed=cfg.seed,
                             device=cfg.device)
    model = make_model(cfg.model, cfg.features, cfg.classes, cfg.hidden, cfg.seed, cfg.device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    epochs, losses = [], []
    task = progress.add_task(f"{backend:>6}", total=cfg.epochs * len(loader)) if progress else None
    step = (lambda: progress.advance(task)) if progress else None
    for _ in range(cfg.epochs):
        r = train_epoch(model, loader, opt, on_batch=step)
        losses += r.pop("losses")
        epochs.append(r)
    test_loader = NodeBatchLoader(NeighborSampler(data.edge_index, list(cfg.fanouts), seed=cfg.seed + 1,
                                                  num_nodes=data.num_nodes, device=cfg.device),
                                  source, data.test_idx, cfg.batch_size, labels=data.y, shuffle=False,
                                  device=cfg.device)
    acc = accuracy(model, test_loader)
    mean = {k: float(np.mean([e[k] for e in epochs])) for k in epochs[0]}
    out = dict(backend=backend, losses=losses, test_acc=acc, **mean,
               feature_share=mean["feature_s"] / max(mean["epoch_s"], 1e-9),
               stall_share=mean["stall_s"] / max(mean["epoch_s"], 1e-9))
    if hasattr(source, "stats"):
        s = source.stats()
        out.update(host_hit_rate=s["host_hit_rate"], gpu_hit_rate=s["gpu_hit_rate"],
                   device_rate=s["device_rate"], data_path=s.get("storage", {}).get("data_path", ""))
    return out


def run(cfg: DemoConfig, console=None) -> list[dict]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    cfg = cfg.resolve()
    console = console or Console()
    torch.set_num_threads(min(torch.get_num_threads(), os.cpu_count() or 1))
    console.print(f"[bold]gpuio demo[/]: {cfg.model.upper()} on an R-MAT graph, {cfg.nodes:,} nodes, "
                  f"{cfg.edges:,} edges, {cfg.features} features, fan-outs {tuple(cfg.fanouts)}, "
                  f"device {cfg.device}")
    cols = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*cols, console=console, transient=False) as progress:
        t = progress.add_task("  data", total=cfg.nodes)
        data, feat_path, reused = prepare_graph(cfg, lambda done, total: progress.update(t, completed=done))
        progress.update(t, completed=cfg.nodes)
        results = [run_backend(b, data, feat_path, cfg, progress) for b in cfg.backends]
    data.features.close()
    console.print(f"features: {feat_path} ({'reused' if reused else 'written'}; page cache warm — "
                  f"benchmarks/gnn_epoch.py measures the memory-constrained regime)")
    print_table(results, console)
    if cfg.plot:
        path = plot(results, os.path.join(cfg.workdir, "gpuio-demo.png"))
        console.print(f"plot: {path}")
    return results


def print_table(results: list[dict], console) -> None:
    from rich.table import Table
    table = Table(title="per epoch (mean); features from:")
    table.add_column("")
    for r in results:
        table.add_column(r["backend"], justify="right")
    pct = (lambda r, k: f"{100 * r[k]:.1f}%" if k in r else "-")
    rows = [("epoch s", lambda r: f"{r['epoch_s']:.3f}"),
            ("feature loading s", lambda r: f"{r['feature_s']:.3f}"),
            ("feature loading share", lambda r: f"{100 * r['feature_share']:.0f}%"),
            ("trainer waiting s", lambda r: f"{r['stall_s']:.3f}"),
            ("compute s", lambda r: f"{r['compute_s']:.3f}"),
            ("host buffer hits", lambda r: pct(r, "host_hit_rate")),
            ("device cache hits", lambda r: pct(r, "gpu_hit_rate")),
            ("rows from storage", lambda r: pct(r, "device_rate")),
            ("test accuracy", lambda r: f"{r['test_acc']:.3f}"),
            ("last loss", lambda r: f"{r['losses'][-1]:.4f}")]
    for name, fmt in rows:
        table.add_row(name, *(fmt(r) for r in results))
    console.print(table)
    ref = next((r for r in results if r["backend"] == "memory"), None)
    for r in results:
        if ref is not None and r is not ref:
            same = r["losses"] == ref["losses"]
            console.print(f"{r['backend']}: losses {'identical to' if same else 'DIFFER from'} in-memory features "
                          f"over {len(r['losses'])} batches; epoch time x{r['epoch_s'] / ref['epoch_s']:.2f} of in-memory")


def plot(results: list[dict], path: str) -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["backend"] for r in results]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(names, [r["compute_s"] for r in results], label="compute")
    ax.bar(names, [max(r["epoch_s"] - r["compute_s"], 0) for r in results],
           bottom=[r["compute_s"] for r in results], label="waiting for features/sampling")
    ax.set_ylabel("seconds per epoch")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
