"""Helpers of the volume tests: unique volume names, an admin identity, seeded block contents."""
from __future__ import annotations

import itertools
import os

import numpy as np

_names = itertools.count()


def fresh(prefix: str = "t", namespace: str = "") -> str:
    """A volume name no other test (or earlier run on a reused cluster) uses."""
    ns = f"{namespace}/" if namespace else ""
    return f"rbd/{ns}{prefix}{os.getpid()}x{next(_names)}"


def admin(cluster, **kw):
    from gpuio.volumes import Identity

    return Identity(conf=cluster.conf, timeout_s=kw.pop("timeout_s", 15), **kw)


def pattern(seed: int, blocks, block_size: int = 4096) -> np.ndarray:
    """Contents of the given blocks as written with seed: every (seed, block) differs."""
    blocks = np.asarray(blocks, dtype=np.int64)
    out = np.empty((len(blocks), block_size), np.uint8)
    for i, b in enumerate(blocks):
        out[i] = np.random.default_rng([seed, int(b)]).integers(0, 256, block_size, dtype=np.uint8)
    return out.reshape(-1)
