"""The multi-GPU cache design on the CPU: bytes read from storage with per-GPU caches vs one cache
partitioned by row owner (WholeGraph / cuGraph), and command G's question (does doubling one GPU's cache cut
the storage bytes by > 30 %?). Bytes from storage for a given capacity depend only on the access sequence and
the cache policy, not on the GPU, so this runs the job's own stores and loader (gpuio_apps.gnn.hetero_job's
make_sources and make_loader, no model: gpuio_apps.gnn.rgat.load_only) on "cpu".

  (a) per-GPU, W = 2: rank 0 and rank 1 of world_size 2, `steps` batches each, each with its own stores of
      device-cache fraction f; bytes = the sum over both ranks;
  (b) partitioned: one logical cache of 2 x the capacity serving both ranks' batches: one loader of
      world_size 1 and 2 x steps batches (same shuffle seed: in every epoch its batches are the union of the
      two ranks', interleaved; it also takes each epoch's last batches that world_size 2 drops: see the
      seeds column), stores of device fraction 2 f;
  (c) one GPU at f and at 2 f over the same `steps` batches (the first `steps` batches of (b)).
Host buffers (host fraction, the same hot rows on every rank in every design) are filled once and shared;
their fill is not counted (a one-time read, W x in the per-GPU design). Bytes are counted over the batches
only, as the job's feature_bytes (hetero_job.storage_bytes). Neighbour samples: rank r samples with sampler
seed seed + r as the job does, so (b)'s odd batches draw other (equally distributed) samples than rank 1's.

    python benchmarks/cache_design.py --root /tmp/igbh-100k          # defaults: 100 000 papers, 1024 float32
    python benchmarks/cache_design.py --tiny                          # seconds, numbers mean nothing
"""
from __future__ import annotations

import argparse
import json
import time


def run_design(ds, graph, scores, hosts, a, fraction: float, rank: int, world: int, steps: int,
               sampler_seed: int) -> dict:
    """One loader (rank of world, `steps` batches) over fresh stores with device-cache `fraction`: bytes read
    from storage per node type over the batches, seeds served, seconds."""
    from gpuio_apps.gnn.hetero_job import HeteroConfig, make_loader, make_sources, storage_bytes
    from gpuio_apps.gnn.rgat import load_only
    cfg = HeteroConfig(root=a.root, papers=a.papers, features=a.features, steps=steps, batch_size=a.batch_size,
                       fanouts=tuple(a.fanouts), gpu_cache_fraction=fraction, host_fraction=a.host_fraction,
                       window=a.window, lookahead=a.lookahead, depth=a.depth, device="cpu", seed=a.seed,
                       sample_threads=a.sample_threads)
    sources = make_sources("gpuio", ds, cfg, scores, hosts)
    before = {nt: storage_bytes({nt: s}) for nt, s in sources.items()}
    loader = _CountSeeds(make_loader(cfg, ds, graph, sources, ds.train_idx, sampler_seed, rank, world))
    r = load_only(loader)
    per = {nt: storage_bytes({nt: s}) - before[nt] for nt, s in sources.items()}
    print(f"  rank {rank} of {world}, cache fraction {fraction:g}: {r['steps']} batches, "
          f"{sum(per.values()) / 1e6:,.1f} MB from storage in {r['run_s']:.0f} s", flush=True)
    return dict(fraction=fraction, rank=rank, world=world, steps=r["steps"], seeds=loader.seeds, per_type=per,
                bytes=sum(per.values()), seconds=r["run_s"])


class _CountSeeds:
    """The loader for load_only (an iterable with .times), counting the seeds it hands out."""
    def __init__(self, loader):
        self.loader, self.times, self.seeds = loader, loader.times, 0

    def __iter__(self):
        for batch in self.loader:
            self.seeds += batch.batch_size
            yield batch


def measure(ds, graph, scores, a) -> dict:
    """The three designs' runs and their ratios (see the module docstring)."""
    f, hosts = a.cache_fraction, {}
    if not 0 < 2 * f <= 1:
        raise ValueError(f"cache fraction f needs 0 < 2 f <= 1, got {f}")
    ranks = [run_design(ds, graph, scores, hosts, a, f, r, 2, a.steps, a.seed + r) for r in (0, 1)]
    per_gpu = dict(per_type={nt: sum(x["per_type"][nt] for x in ranks) for nt in ds.node_types},
                   seeds=sum(x["seeds"] for x in ranks), steps=sum(x["steps"] for x in ranks),
                   seconds=sum(x["seconds"] for x in ranks))
    per_gpu["bytes"] = sum(per_gpu["per_type"].values())
    out = {"a_per_gpu": per_gpu, "a_rank0": ranks[0], "a_rank1": ranks[1],
           "b_partitioned": run_design(ds, graph, scores, hosts, a, 2 * f, 0, 1, 2 * a.steps, a.seed),
           "c_one_f": run_design(ds, graph, scores, hosts, a, f, 0, 1, a.steps, a.seed),
           "c_one_2f": run_design(ds, graph, scores, hosts, a, 2 * f, 0, 1, a.steps, a.seed)}
    div = (lambda x, y: x / y if y else float("nan"))
    out["ratios"] = {k: {nt: div(out[n]["per_type"][nt], out[d]["per_type"][nt]) for nt in ds.node_types} |
                     {"all": div(out[n]["bytes"], out[d]["bytes"])}
                     for k, n, d in (("b/a", "b_partitioned", "a_per_gpu"), ("c2f/cf", "c_one_2f", "c_one_f"))}
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default="gpuio-igbh-cache-design", help="dataset directory (reused if it matches)")
    p.add_argument("--papers", type=int, default=100_000)
    p.add_argument("--features", type=int, default=1024, help="float32 columns (1024: a 4 KiB page per row)")
    p.add_argument("--steps", type=int, default=100, help="batches per rank")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--cache-fraction", type=float, default=0.1, help="f: one GPU's device cache per type")
    p.add_argument("--host-fraction", type=float, default=0.2)
    p.add_argument("--window", type=int, default=32)
    p.add_argument("--lookahead", type=int, default=29)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--sample-threads", type=int, default=1, help="samples do not depend on it (2 shared cores)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tiny", action="store_true", help="600 papers, 16 columns, 6 steps of 32")
    p.add_argument("--json", default="", help="write the figures here")
    a = p.parse_args(argv)
    if a.tiny:
        a.papers, a.features, a.steps, a.batch_size = 600, 16, 6, 32
    a.fanouts = [int(x) for x in a.fanouts.split(",")]
    from gpuio_apps.gnn.hetero_data import prepare_dataset, sample_scores
    from gpuio_apps.gnn.hetero_job import HeteroConfig
    from gpuio.pyg.hetero import HeteroGraphStore
    t0 = time.perf_counter()
    ds, reused = prepare_dataset(HeteroConfig(root=a.root, papers=a.papers, features=a.features, seed=a.seed))
    scores = sample_scores(ds)
    graph = HeteroGraphStore.from_dataset(ds, in_memory=True, device="cpu")  # structure: no feature bytes
    print(f"{a.root} ({'reused' if reused else 'written'}): {ds.num_nodes} nodes, {ds.num_edges:,} edges, "
          f"{ds.feature_bytes() / 2**30:.2f} GiB of features; {a.steps} batches of {a.batch_size} per rank, "
          f"fan-outs {a.fanouts}, window {a.window} / look-ahead {a.lookahead} / depth {a.depth}, f = "
          f"{a.cache_fraction}, host {a.host_fraction} ({time.perf_counter() - t0:.1f} s)", flush=True)
    out = measure(ds, graph, scores, a)
    types = list(ds.node_types)
    rows = [("(a) per-GPU, 2 x f, rank 0", "a_rank0"), ("(a) per-GPU, 2 x f, rank 1", "a_rank1"),
            ("(a) per-GPU, 2 x f, both", "a_per_gpu"), ("(b) partitioned, one 2 f", "b_partitioned"),
            ("(c) one GPU, f", "c_one_f"), ("(c) one GPU, 2 f", "c_one_2f")]
    mb = (lambda x: f"{x / 1e6:,.1f}")
    print("\nMB read from storage over the batches\n")
    print("| design | batches | seeds | " + " | ".join(types) + " | all | MB / 1000 seeds | s |")
    print("|---" * (len(types) + 6) + "|")
    for label, k in rows:
        r = out[k]
        print(f"| {label} | {r['steps']} | {r['seeds']:,} | " + " | ".join(mb(r["per_type"][nt]) for nt in types)
              + f" | {mb(r['bytes'])} | {r['bytes'] / max(r['seeds'], 1) / 1e3:.2f} | {r['seconds']:.0f} |")
    for k, what in (("b/a", "partitioned / per-GPU"), ("c2f/cf", "one GPU 2 f / f")):
        q = out["ratios"][k]
        print(f"| {what} | | | " + " | ".join(f"{q[nt]:.3f}" for nt in types) + f" | {q['all']:.3f} | | |")
    ra, rc = out["ratios"]["b/a"]["all"], out["ratios"]["c2f/cf"]["all"]
    print(f"\npartitioned saves {100 * (1 - ra):.1f} % of the per-GPU design's storage bytes "
          f"({mb(out['a_per_gpu']['bytes'] - out['b_partitioned']['bytes'])} MB over {a.steps} steps); "
          f"doubling one GPU's cache cuts its bytes by {100 * (1 - rc):.1f} % (command G's bar: > 30 %)")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(dict(args=vars(a), results=out), fh, indent=1)
    return out


if __name__ == "__main__":
    main()
