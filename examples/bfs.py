"""BFS on an out-of-core graph through BaM-style device arrays: the edges stay on storage, a GPU (or host) page
cache of --cache-mib serves every read, the result is checked (SciPy on small graphs, Graph500 rules always).

    python examples/bfs.py --scale 20 --cache-mib 256            # Kronecker graph built in ./gpuio-bfs-s20
    python examples/bfs.py --edges my_edges.txt --root 0         # "u v" lines, or a (2, E) .npy
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from gpuio_apps.papers.graph_analytics import (CSRGraph, bfs, choose_root, generate_kronecker, load_edges, make_source,
                                               scipy_reference, validate_bfs)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=14)
    ap.add_argument("--edgefactor", type=int, default=16)
    ap.add_argument("--edges", default=None, help="edge-list file instead of a generated graph")
    ap.add_argument("--dir", default=None, help="graph folder (default ./gpuio-bfs-s<scale> or next to --edges)")
    ap.add_argument("--root", type=int, default=None)
    ap.add_argument("--cache-mib", type=float, default=16)
    ap.add_argument("--page-bytes", type=int, default=None)
    ap.add_argument("--device", default="auto")
    a = ap.parse_args(argv)
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device)
    path = a.dir or (os.path.splitext(a.edges)[0] + "-csr" if a.edges else os.path.abspath(f"gpuio-bfs-s{a.scale}"))
    if a.edges:
        g = load_edges(path, a.edges, device=device)
    elif os.path.exists(os.path.join(path, "graph.json")) and CSRGraph(path).meta.get("scale") == a.scale:
        g = CSRGraph(path)
    else:
        g = generate_kronecker(path, a.scale, a.edgefactor, device=device)
    root = choose_root(g, 1) if a.root is None else a.root
    src = make_source("gpuio-array", g, device, weights=False, cache_bytes=int(a.cache_mib * 2**20),
                      page_bytes=a.page_bytes)
    rp = torch.from_numpy(g.row_ptr).to(device)
    t = time.perf_counter()
    level, parent, st = bfs(rp, src, root)
    if device.type == "cuda":
        torch.cuda.synchronize()
    secs = time.perf_counter() - t
    errors = validate_bfs(g, root, level, parent)
    checks = ["graph500 " + ("ok" if not errors else "FAILED: " + "; ".join(errors))]
    if g.num_nodes <= 1 << 16:
        same = np.array_equal(level.cpu().numpy(), scipy_reference(g, root)["level"])
        checks.append("scipy " + ("ok" if same else "MISMATCH"))
    stats = src.stats()
    src.close()
    reached = int((level >= 0).sum())
    print(f"{g}: BFS from {root} on {device}: {reached} vertices reached in {st['rounds']} rounds, {secs:.3f} s, "
          f"{st['edges_read']} edges read through the device array, hit rate {stats['hit_rate']:.3f}; "
          + ", ".join(checks))
    return dict(seconds=secs, reached=reached, errors=errors, checks=checks, **st, **stats)


if __name__ == "__main__":
    main()
