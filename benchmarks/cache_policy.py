"""Which eviction policy for the device page cache? Replays GNN feature-access traces (R-MAT graph,
neighbour sampling with fan-outs 25,10) through `gpuio.cache.PageCache` under each policy and cache size,
and prints page hit rate and policy cost per batch. Everything is seeded; one table, JSON beside it.

    python benchmarks/cache_policy.py            # CPU-sized
    python benchmarks/cache_policy.py --tiny     # seconds (CI smoke)
    python benchmarks/cache_policy.py --device cuda --nodes 2000000 --edges 20000000
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from gpuio.cache.page_cache import POLICIES, PageCache
from gpuio_apps.data import rmat_edges
from gpuio.graph import coalesce_undirected
from gpuio.pyg import NeighborSampler


def trace(nodes, edges, batches, batch_size, seed, device):
    g = coalesce_undirected(rmat_edges(nodes, edges, seed), nodes)
    s = NeighborSampler(g, [25, 10], seed=seed, num_nodes=nodes, device=device)
    gen = torch.Generator().manual_seed(seed)
    seeds = torch.randperm(nodes, generator=gen)[: batches * batch_size].view(batches, batch_size)
    return [s.sample(b).node for b in seeds]


def replay(batches, num_pages, page_rows, slots, policy, device):
    cache = PageCache(num_pages, slots, page_rows, (1,), torch.float32, device, policy)
    hits = total = 0
    t_policy = 0.0
    for nodes in batches:
        pages = torch.unique(nodes // page_rows)
        t0 = time.perf_counter()
        slot = cache.lookup(pages)
        hit = slot >= 0
        cache.touch(slot[hit])
        pinned = torch.zeros(slots, dtype=torch.bool, device=device)
        pinned[slot[hit]] = True
        miss = pages[~hit]
        victims = cache.choose_victims(miss.numel(), pinned)
        cache.install(miss[: victims.numel()], victims,
                      torch.zeros(victims.numel(), page_rows, 1, device=device))
        if device.type == "cuda":
            torch.cuda.synchronize()
        t_policy += time.perf_counter() - t0
        hits += int(hit.sum())
        total += pages.numel()
    return hits / max(total, 1), t_policy / len(batches)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=100_000)
    p.add_argument("--edges", type=int, default=1_000_000)
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--page-rows", type=int, default=8, help="rows per page (4 KiB / 512-byte rows)")
    p.add_argument("--fractions", default="0.05,0.1,0.25", help="cache size as share of all pages")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--json", default="cache_policy.json")
    a = p.parse_args(argv)
    if a.tiny:
        a.nodes, a.edges, a.batches, a.batch_size, a.seeds = 5000, 40000, 10, 64, 1
    device = torch.device(a.device)
    num_pages = -(-a.nodes // a.page_rows)
    rows = []
    traces = [trace(a.nodes, a.edges, a.batches, a.batch_size, s, device) for s in range(a.seeds)]
    for frac in (float(f) for f in a.fractions.split(",")):
        slots = max(1, int(num_pages * frac))
        for policy in POLICIES:
            res = [replay(t, num_pages, a.page_rows, slots, policy, device) for t in traces]
            rows.append(dict(cache_fraction=frac, policy=policy,
                             hit_rate=statistics.median(r[0] for r in res),
                             hit_rate_spread=max(r[0] for r in res) - min(r[0] for r in res),
                             policy_ms_per_batch=1e3 * statistics.median(r[1] for r in res)))
    print(f"page-cache policies: R-MAT {a.nodes:,} nodes / {a.edges:,} edges, fan-outs 25,10, "
          f"{a.batches} batches x {a.batch_size} seeds, {a.page_rows} rows/page, device {device}, "
          f"median over {a.seeds} seeds")
    print(f"{'cache':>6} {'policy':>7} {'hit rate':>9} {'spread':>7} {'ms/batch':>9} {'vs clock':>9}")
    for r in rows:
        clock = next(c for c in rows if c["cache_fraction"] == r["cache_fraction"] and c["policy"] == "clock")
        print(f"{r['cache_fraction']:>6.2f} {r['policy']:>7} {r['hit_rate']:>9.3f} {r['hit_rate_spread']:>7.3f} "
              f"{r['policy_ms_per_batch']:>9.2f} {r['hit_rate'] - clock['hit_rate']:>+9.3f}")
    with open(a.json, "w") as f:
        json.dump(dict(args=vars(a), rows=rows), f, indent=1)
    return rows


if __name__ == "__main__":
    main()
