"""Samplers for the tests of sampling in worker processes (test_loader_workers.py). Module-level so that spawned
children can import them."""
from __future__ import annotations

import os

from gpuio.pyg import NeighborSampler

SAMPLED_IN: list[int] = []  # pid of every sample() call made in this process


class CountingSampler(NeighborSampler):
    """gpuio.pyg.NeighborSampler that records the calls made in this process, and crosses spawn as (graph,
    fan-outs, seed): gpuio's own sampler does not cross spawn yet (torch's ForkingPickler cannot send the
    torch.Generator it holds)."""

    def sample(self, seeds, generator=None):
        SAMPLED_IN.append(os.getpid())
        return super().sample(seeds, generator)

    def __reduce__(self):
        return CountingSampler, (self.csc, self.num_neighbors, self.replace, self.seed, None, self.num_nodes)
