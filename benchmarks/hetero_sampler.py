"""The heterogeneous neighbour sampler alone (the CPU sampler bounded the RGAT runs): seconds per
batch, median of repeated passes, structure in memory and on storage, and the batches per second a
`HeteroBatchLoader` producer reaches with `--sample-threads` sampling workers.

    python benchmarks/hetero_sampler.py --papers 50000 --data-dir /var/tmp/igbh50k      # dev box / GPU box
    python benchmarks/hetero_sampler.py --papers 200000 --device cuda --sample-threads 4        # GPU box
    python benchmarks/hetero_sampler.py --tiny                                            # CI smoke

Prints per structure (memory, file): ms per batch (median over --repeats passes of --batches batches, each
pass the same seeds with a fresh sampler of the same seed) and, with --profile, the top functions of one
pass (cProfile). The loader line: batches/s of the producer with features from in-memory rows (no I/O), so
it is sampling plus the loader's own work; ratio = threaded / one thread.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import time

import torch

from gpuio.cache import InMemoryRows
from gpuio_apps.data import igbh
from gpuio.pyg.hetero import HeteroGraphStore, HeteroNeighborSampler
from gpuio.pyg.hetero_loader import HeteroBatchLoader


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--papers", type=int, default=50_000)
    ap.add_argument("--features", type=int, default=64, help="feature columns (only the loader line reads them)")
    ap.add_argument("--data-dir", default=None, help="IGBH folder (default: ./gpuio-igbh-p<papers>-f<features>)")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--fanouts", default="10,5")
    ap.add_argument("--batches", type=int, default=20, help="batches per pass")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--structure", default="memory,file")
    ap.add_argument("--sample-threads", type=int, default=2, help="loader sampling workers for the loader line")
    ap.add_argument("--device", default="cpu", help="where the structures deliver and sampling runs (cpu, cuda)")
    ap.add_argument("--torch-threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--profile", action="store_true", help="print cProfile's top functions of one pass")
    ap.add_argument("--tiny", action="store_true", help="CI smoke: 600 papers, 2 batches of 64, 2 repeats")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.tiny:
        a.papers, a.features, a.batch_size, a.batches, a.repeats = 600, 8, 64, 2, 2
    return a


def _pass(sampler_factory, batches):
    s = sampler_factory()
    t0 = time.perf_counter()
    for b in batches:
        s.sample(b, "paper")
    if s.device.type == "cuda":
        torch.cuda.synchronize(s.device)
    return (time.perf_counter() - t0) / len(batches)


def main(argv=None) -> dict:
    a = parse(argv)
    if a.torch_threads:
        torch.set_num_threads(a.torch_threads)
    root = a.data_dir or f"gpuio-igbh-p{a.papers}-f{a.features}"
    if not os.path.exists(os.path.join(root, "meta.json")):
        igbh.generate_igbh(root, igbh.IGBHConfig(papers=a.papers, features=a.features))
    ds = igbh.open_igbh(root)
    fan = [int(k) for k in a.fanouts.split(",")]
    g = torch.Generator().manual_seed(0)
    seeds = ds.train_idx[torch.randperm(ds.train_idx.numel(), generator=g)]
    batches = list(torch.split(seeds, a.batch_size))[:a.batches]
    out = dict(papers=a.papers, batch_size=a.batch_size, fanouts=fan, threads=torch.get_num_threads())
    graphs = {}
    for st in a.structure.split(","):
        graphs[st] = HeteroGraphStore.from_dataset(ds, in_memory=(st == "memory"), device=a.device)
        make = (lambda gr=graphs[st]: HeteroNeighborSampler(gr, fan, seed=0))
        _pass(make, batches[:1])  # warm the structure caches and the allocator
        times = [_pass(make, batches) for _ in range(a.repeats)]
        med = statistics.median(times)
        out[f"{st}_ms_per_batch"] = med * 1e3
        print(f"{st:6s} structure: {med * 1e3:8.2f} ms/batch (median of {a.repeats}; min {min(times) * 1e3:.2f}, "
              f"max {max(times) * 1e3:.2f})", flush=True)
        if a.profile:
            pr = cProfile.Profile()
            pr.enable()
            _pass(make, batches)
            pr.disable()
            pstats.Stats(pr, stream=sys.stdout).sort_stats("tottime").print_stats(18)
    gr = next(iter(graphs.values()))
    feats = {nt: InMemoryRows(torch.zeros(n, 1)) for nt, n in ds.num_nodes.items()}
    rates = {}
    for workers in sorted({1, max(1, a.sample_threads)}):
        kw = {} if workers == 1 else dict(sample_threads=workers)
        best = []
        for _ in range(max(1, a.repeats // 2)):
            ld = HeteroBatchLoader(HeteroNeighborSampler(gr, fan, seed=0), feats, ds.train_idx, batch_size=a.batch_size,
                                   max_batches=len(batches), depth=2, lookahead=0, **kw)
            t0 = time.perf_counter()
            for _b in ld:
                pass
            best.append(len(ld) / (time.perf_counter() - t0))
        rates[workers] = statistics.median(best)
    out["loader_batches_per_s"] = {str(k): v for k, v in rates.items()}
    hi = max(rates)
    out["loader_ratio"] = rates[hi] / rates[1]
    print(f"loader producer: {rates[1]:.1f} batches/s with 1 sampling thread, {rates[hi]:.1f} with {hi} "
          f"(ratio {out['loader_ratio']:.2f})", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
