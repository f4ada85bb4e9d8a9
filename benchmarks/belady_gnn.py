"""Reading less, not only reading fast: bytes a `gpuio.TableCache` reads from storage for N GNN
mini-batches against Belady's MIN (the offline optimum) on the same row-access trace, same capacity.

Homogeneous GNN job (R-MAT graph, GraphSAGE-style sampling as `gpuio demo` / benchmarks/gnn_epoch.py),
features only (no model: the bytes do not depend on it). The rows the store serves are recorded per
group (a batch, or the batches the accumulator merged into one read); MIN is computed on that trace
per tier (gpuio_apps.bench.belady.store_vs_min): the same constant host buffer, MIN over the rest with the
device cache's slots; and against MIN using all capacity as one cache (one page per host row). Printed per
configuration: window look-ahead on/off and each eviction policy; goal ratio <= 1.2. Beside it, the bytes
the farthest-in-future rule would read seeing only `window` groups ahead (what a window-aware admission
could reach; NodeBatchLoader samples and announces `window` batches ahead of the one it submits).
The heterogeneous job prints the same ratio with `examples/rgat_igbh.py --belady`.

    python benchmarks/belady_gnn.py                 # 2 M nodes x 256 float32 (2 GiB), 100 steps
    python benchmarks/belady_gnn.py --tiny          # CI smoke: seconds, numbers mean nothing
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch


def keep_on_overflow(store) -> None:
    """Experimental admission (a prototype for cache/table_cache.py, applied by wrapping the store's
    page cache): when a group misses at least as many pages as the cache has evictable slots, fill only
    the empty slots and bypass the rest instead of replacing every resident page (which keeps whatever
    pages had the lowest ids). Otherwise the policy chooses victims as usual."""
    cache = store.cache
    choose = cache.choose_victims

    def victims(k, pinned):
        evictable = int((~pinned).sum())
        if k >= evictable:
            return ((~pinned) & (cache.slot_page < 0)).nonzero().flatten()[:k]
        return choose(k, pinned)
    cache.choose_victims = victims


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=2_000_000)
    p.add_argument("--edges", type=int, default=20_000_000)
    p.add_argument("--features", type=int, default=256)
    p.add_argument("--cache-fraction", type=float, default=0.125, help="device cache / table")
    p.add_argument("--host-fraction", type=float, default=0.01, help="host buffer rows / all rows")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--fanouts", default="25,10")
    p.add_argument("--windows", default="0,8", help="window look-ahead settings to compare (batches)")
    p.add_argument("--policies", default="clock,lru", help="eviction policies to compare")
    p.add_argument("--admissions", default="replace,keep",
                   help="replace: the store as it is; keep: keep_on_overflow (experimental)")
    p.add_argument("--workdir", default=".")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--json", default="belady_gnn.json")
    a = p.parse_args(argv)
    if a.tiny:
        a.nodes, a.edges, a.features, a.batch_size, a.steps, a.fanouts = 3000, 15000, 16, 64, 6, "5,3"
    from gpuio.cache import TableCache
    from gpuio_apps.bench.belady import record_served, store_vs_min
    from gpuio_apps.data import synthetic_graph
    from gpuio.graph import degree_scores
    from gpuio.loader import NodeBatchLoader
    from gpuio.pyg import NeighborSampler
    from gpuio.tensor import TensorFile
    os.makedirs(a.workdir, exist_ok=True)  # a fresh machine: the folder named may not exist yet
    path = os.path.join(a.workdir, "gpuio-belady-features.npy")
    t0 = time.perf_counter()
    data = synthetic_graph(path, a.nodes, a.edges, a.features, 8, seed=0, split=(1.0, 0.0, 0.0))
    data.features.close()
    print(f"graph: {a.nodes:,} nodes, {data.edge_index.shape[1]:,} edges, {a.features} features "
          f"({time.perf_counter() - t0:.1f} s); {a.steps} batches of {a.batch_size}, device {a.device}")
    seeds = data.train_idx[torch.randperm(data.train_idx.numel(), generator=torch.Generator().manual_seed(0))]
    seeds = seeds[: a.steps * a.batch_size]
    fan = [int(f) for f in a.fanouts.split(",")]
    results = []
    configs = [(w, pol, adm) for adm in a.admissions.split(",") for w in (int(x) for x in a.windows.split(","))
               for pol in a.policies.split(",")]
    for window, policy, admission in configs:
        if admission not in ("replace", "keep"):
            raise ValueError(f"--admissions takes replace and/or keep, got {admission!r}")
        tf = TensorFile.open(path)
        store = TableCache(tf, gpu_cache_bytes=int(tf.nbytes * a.cache_fraction),
                             host_cache_rows=int(a.nodes * a.host_fraction),
                             hot_scores=degree_scores(data.edge_index, a.nodes),
                             window=window, accumulate=True, policy=policy, device=a.device)
        if admission == "keep":
            keep_on_overflow(store)
        sampler = NeighborSampler(data.edge_index, fan, seed=0, num_nodes=a.nodes, device=a.device)
        trace = record_served(store)  # the rows of each served group, in serving order
        loader = NodeBatchLoader(sampler, store, seeds, a.batch_size, shuffle=False, device=a.device)
        t1 = time.perf_counter()
        n = sum(1 for _ in loader)
        load_s = time.perf_counter() - t1
        r = store_vs_min(store, trace, lookahead=window)
        r.update(window=window, policy=policy, admission=admission, steps=n, load_s=load_s,
                 page_rows=store.page_rows, gpu_hit_rate=store.stats()["gpu_hit_rate"],
                 host_hit_rate=store.stats()["host_hit_rate"])
        results.append(r)
        tf.close()
        print(f"{admission:7s} window {window:2d} policy {policy:6s}: read {r['gpuio_bytes'] / 2**20:10.1f} MiB, "
              f"MIN {r['min_bytes'] / 2**20:10.1f} MiB, ratio {r['ratio']:.3f} (goal <= 1.2; device tier "
              f"{r['device_tier_ratio']:.3f}, whole-capacity MIN {r['ratio_whole']:.3f}); "
              f"hits host {r['host_hit_rate']:.2f} GPU {r['gpu_hit_rate']:.2f}; {r['capacity_pages']:,} pages "
              f"of {r['page_rows']} rows; MIN seeing {window} groups ahead: {r['window_min_ratio']:.3f} x MIN")
    with open(a.json, "w") as f:
        json.dump(dict(args=vars(a), results=results), f, indent=1)
    best = min(results, key=lambda r: r["ratio"])
    print(f"best gpuio bytes / MIN: {best['ratio']:.3f}")
    print(f"judged: bytes read vs Belady's MIN (homogeneous GNN, {a.nodes:,} nodes x {a.features} features, "
          f"{a.steps} batches; {best['admission']} window {best['window']} {best['policy']}, the best of "
          f"{len(results)} configuration(s)): {best['gpuio_bytes'] / 1e9:.2f} GB vs {best['min_bytes'] / 1e9:.2f} GB "
          f"= {best['ratio']:.3f} (goal <= 1.2): {'MET' if best['ratio'] <= 1.2 else 'NOT MET'}")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
