"""The hetero job's dataset (gpuio_apps.gnn.hetero_job): an IGBH-shaped graph generated, imported or reused in the
job's root, and the node scores that pick the rows of gpuio's constant host buffer."""
from __future__ import annotations

import json
import os
import time
from dataclasses import asdict

import numpy as np
import torch


def prepare_dataset(cfg, log=print):
    """The dataset in cfg.root: imported from cfg.igbh, reused when its generator parameters match, else
    generated (out of core, chunked)."""
    from gpuio_apps.data.igbh import IGBHConfig, generate_igbh, import_igbh, open_igbh
    meta_path = os.path.join(cfg.root, "meta.json")
    if cfg.igbh:
        if not os.path.exists(meta_path):
            log(f"importing IGBH from {cfg.igbh} into {cfg.root}")
            import_igbh(cfg.igbh, cfg.root)
        return open_igbh(cfg.root, seed=cfg.seed), True
    gen = IGBHConfig(papers=cfg.papers, features=cfg.features, dtype=cfg.dtype, edge_scale=cfg.edge_scale,
                     seed=cfg.seed, gen_device=cfg.gen_device)
    try:
        with open(meta_path) as f:
            if json.load(f).get("generator") == asdict(gen):
                return open_igbh(cfg.root, seed=cfg.seed), True
    except (OSError, ValueError):
        pass
    t0 = time.perf_counter()
    ds = generate_igbh(cfg.root, gen)
    log(f"generated {cfg.root}: {ds.num_edges:,} edges, {ds.feature_bytes() / 2**30:.2f} GiB of features "
        f"in {time.perf_counter() - t0:.1f} s")
    return ds, False


def sample_scores(ds) -> dict:
    """Per node type, how often a node can be drawn as a sampled neighbour: its out-degree summed over
    the relations it is a source of (streamed from the CSC row files; 8 bytes per node in memory)."""
    from gpuio.graph.csc_file import csc_chunks
    scores = {nt: np.zeros(n, dtype=np.int64) for nt, n in ds.num_nodes.items()}
    for et in ds.edge_types:
        for _, src in csc_chunks(ds.relation_path(et))():
            scores[et[0]] += np.bincount(src, minlength=scores[et[0]].size)
    return {nt: torch.from_numpy(s) for nt, s in scores.items()}
