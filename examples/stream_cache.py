"""Mini-batch k-means over a derived dataset 8x larger than its DRAM budget, four ways:

  gpuio   the derived dataset is cached once in a gpuio.streams.DatasetCache and streamed back every epoch
  npy     (a) one np.save file per batch, np.load'ed every epoch (through the page cache)
  pickle  (b) one pickle file per batch, loaded every epoch
  recompute (c) the dataset is derived again every epoch

The derived dataset is random Fourier features of raw points (a matmul + cos per batch: the "expensive"
step). Only one batch at a time is in memory (the DRAM budget is dataset / 8, and a batch is a quarter
of it). Every method sees the same batches in the same order, so they must end with the same centroids:
checked. Prints seconds per epoch (median of the epochs after the first) and ratios to gpuio.

    python examples/stream_cache.py                      # tiny CPU defaults
    python examples/stream_cache.py --dataset 8G --dir /data   # GPU machine, run inside a memory cgroup
"""
from __future__ import annotations

import argparse
import os
import pickle
import shutil
import statistics
import time

import numpy as np


def derive(i: int, rows: int, dim_in: int, dim_out: int) -> np.ndarray:
    """Batch i of the derived dataset: random Fourier features of seeded raw points (float32)."""
    rng = np.random.default_rng(i)
    x = rng.standard_normal((rows, dim_in), dtype=np.float32) + (i % 7)
    w = np.random.default_rng(10_000).standard_normal((dim_in, dim_out), dtype=np.float32)
    return np.cos(x @ w * 0.3, dtype=np.float32)


def kmeans_epoch(batches, centroids: np.ndarray, counts: np.ndarray) -> None:
    """One pass of mini-batch k-means (Sculley's per-centre learning rate), in place."""
    for b in batches:
        d = (b * b).sum(1)[:, None] - 2 * b @ centroids.T + (centroids * centroids).sum(1)[None, :]
        onehot = np.zeros((len(b), len(centroids)), dtype=np.float32)
        onehot[np.arange(len(b)), d.argmin(1)] = 1
        n = onehot.sum(0).astype(np.float64)
        sums = onehot.T @ b
        counts += n
        hit = n > 0
        centroids[hit] += (sums[hit] - n[hit, None] * centroids[hit]) / counts[hit, None]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="32M", help="derived dataset size (default 32M)")
    ap.add_argument("--dim", type=int, default=64, help="features per row")
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--raw-dim", type=int, default=64,
                    help="width of the raw points; deriving costs ~ rows x raw-dim (random numbers + matmul)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--dir", default=".", help="where the cache and the baseline files go")
    ap.add_argument("--methods", default="gpuio,npy,pickle,recompute")
    a = ap.parse_args(argv)
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    total = int(float(a.dataset[:-1]) * units[a.dataset[-1].upper()]) if a.dataset[-1].upper() in units \
        else int(a.dataset)
    budget = total // 8
    batch_bytes = budget // 4
    rows = max(1, batch_bytes // (4 * a.dim))
    nbatches = max(1, total // (rows * 4 * a.dim))
    dim_in = a.raw_dim  # deriving the features (random raw points, matmul, cos) is the expensive step
    make = lambda: (derive(i, rows, dim_in, a.dim) for i in range(nbatches))  # noqa: E731
    work = os.path.join(a.dir, "stream-cache-example")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    results, finals = {}, {}
    try:
        for method in a.methods.split(","):
            t0 = time.perf_counter()
            closer = None
            if method == "gpuio":
                from gpuio.streams import DatasetCache
                cache = DatasetCache(os.path.join(work, "cache.bin"), mode="c", create_bytes=total + total // 4 + (64 << 20),
                              buffer_pool_bytes=max(16 << 20, min(64 << 20, budget)))
                cache.fill(make())
                epoch_source, closer = (lambda: iter(cache)), cache.close
            elif method == "npy":
                for i, b in enumerate(make()):
                    np.save(os.path.join(work, f"b{i}.npy"), b)
                epoch_source = lambda: (np.load(os.path.join(work, f"b{i}.npy")) for i in range(nbatches))  # noqa
            elif method == "pickle":
                for i, b in enumerate(make()):
                    with open(os.path.join(work, f"b{i}.pkl"), "wb") as f:
                        pickle.dump(b, f, protocol=5)
                epoch_source = lambda: (pickle.load(open(os.path.join(work, f"b{i}.pkl"), "rb"))  # noqa
                                        for i in range(nbatches))
            elif method == "recompute":
                epoch_source = make
            else:
                raise SystemExit(f"unknown method {method!r}")
            prepare_s = time.perf_counter() - t0
            centroids = derive(0, a.k, dim_in, a.dim).copy()
            counts = np.zeros(a.k)
            times = []
            for _ in range(a.epochs):
                t = time.perf_counter()
                kmeans_epoch(epoch_source(), centroids, counts)
                times.append(time.perf_counter() - t)
            if closer:
                closer()
            results[method] = {"prepare_s": prepare_s, "epoch_s": times,
                               "epoch_s_median": statistics.median(times[1:] or times)}
            finals[method] = centroids
            for f in os.listdir(work):
                os.unlink(os.path.join(work, f))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ref = next(iter(finals.values()))
    for m, c in finals.items():
        if not np.array_equal(c, ref):
            raise SystemExit(f"method {m} ended with different centroids: a data path is wrong")
    base = results.get("gpuio", next(iter(results.values())))["epoch_s_median"]
    print(f"mini-batch k-means: dataset {nbatches * rows * 4 * a.dim / 2**20:.1f} MiB in {nbatches} batches of "
          f"{rows} x {a.dim} float32, DRAM budget {budget / 2**20:.1f} MiB, {a.epochs} epochs")
    print(f"{'method':<10} {'prepare s':>10} {'epoch s':>9} {'epoch / gpuio':>14}")
    for m, r in results.items():
        print(f"{m:<10} {r['prepare_s']:>10.3f} {r['epoch_s_median']:>9.3f} {r['epoch_s_median'] / base:>14.2f}")
    print("all methods ended with identical centroids")
    return results


if __name__ == "__main__":
    main()
