"""Samplers for the tests of sampling in worker processes (test_loader_workers.py). Module-level so that spawned
children can import them."""
from __future__ import annotations

import os

from gpuio.pyg import NeighborSampler

SAMPLED_IN: list[int] = []  # pid of every sample() call made in this process


class CountingSampler(NeighborSampler):
    """gpuio.pyg.NeighborSampler that records the calls made in this process."""

    def sample(self, seeds, generator=None):
        SAMPLED_IN.append(os.getpid())
        return super().sample(seeds, generator)
