"""`gpuio.pyg.NodeLoader`: PyG's `NodeLoader` over gpuio stores, with the sampling in worker processes and the
feature gather in the main process (GraphBolt's split), deterministic whatever the number of workers.

PyG's own `NodeLoader((feature_store, graph_store), num_workers=N)` gathers the features in the workers too
(`filter_per_worker` defaults to True for remote stores), so a feature store whose tables sit behind GPU
caches would be used from forked children, where CUDA cannot run; and each worker draws from a copy of the
sampler's one generator, so the batches change with N. This loader keeps PyG's interface and batches
(`Data`/`HeteroData` with `n_id`, `batch_size`, ...) and changes three things:
- `sample_workers=N` processes sample (a persistent torch DataLoader: fork by default, spawn by default for
  a sampler on a CUDA device, `start_method=` to choose); the gather through the `PygFeatureStore` (its
  `gpuio.TableCache` caches, TensorFiles) runs in the main process (`filter_per_worker=False`);
- only the sampler and the input ids go to the workers (under spawn they are pickled; the stores never
  are);
- batch i (counted over the loader's epochs) is sampled with its own generator
  (`gpuio.loader.batch_generator(sampler.seed, i)`), and the seeds are shuffled with a generator seeded
  from `seed` and the epoch: the same batches with 0, 1 or N workers, run after run.
The sampler must take `generator=` in `sample_from_nodes` and have `seed` and `device`
(`gpuio.pyg.NeighborSampler`, `gpuio.pyg.HeteroNeighborSampler`).
"""
from __future__ import annotations

import torch
from torch_geometric.loader import NodeLoader as PygNodeLoader
from torch_geometric.loader.utils import get_input_nodes

from gpuio.loader import WORKER_TIMEOUT_S_DEFAULT, batch_generator, check_sample_workers, stop_workers


class _SerialBatches(torch.utils.data.Sampler):
    """Batches of positions into the input nodes, each with its serial: (serial, positions). Runs in the main
    process; serials continue across epochs."""

    def __init__(self, n: int, batch_size: int, shuffle: bool, seed: int, drop_last: bool):
        self.n, self.batch_size, self.shuffle, self.seed, self.drop_last = n, batch_size, shuffle, seed, drop_last
        self.epoch = self.serial = 0

    def __len__(self) -> int:
        return self.n // self.batch_size if self.drop_last else -(-self.n // self.batch_size)

    def __iter__(self):
        """A generator: torch makes (and drops) an iterator more than once per epoch; only the one it reads
        counts an epoch and its serials."""
        order = torch.arange(self.n)
        if self.shuffle:
            order = torch.randperm(self.n, generator=torch.Generator().manual_seed(self.seed * 7919 + self.epoch))
        self.epoch += 1
        batches = list(torch.split(order, self.batch_size))[:len(self)]
        first, self.serial = self.serial, self.serial + len(batches)
        for i, b in enumerate(batches):
            yield [(first + i, b)]  # a "batch" of one key: _KeyItems


class _KeyItems(torch.utils.data.Dataset):
    """The loader's dataset: a key (serial, positions) is its own item, handed to the collate function."""

    def __getitem__(self, key):
        return key


class _SampleBatch:
    """The workers' collate function: (serial, positions) -> the sampler's output for those input nodes."""

    def __init__(self, input_data, sampler):
        self.input_data, self.sampler = input_data, sampler

    def __call__(self, items):
        (serial, positions), = items
        s = self.sampler
        return s.sample_from_nodes(self.input_data[positions],
                                   generator=batch_generator(s.seed, serial, s.device))


class NodeLoader(PygNodeLoader):
    """PyG's NodeLoader with sampling in `sample_workers` processes and the gather in the main process (see
    the module docstring)."""

    _OWN = ("num_workers", "filter_per_worker", "multiprocessing_context", "sampler", "batch_sampler",
            "collate_fn", "dataset")

    def __init__(self, data, node_sampler, input_nodes=None, batch_size: int = 1, shuffle: bool = False,
                 seed: int = 0, drop_last: bool = False, sample_workers: int = 0, start_method: str | None = None,
                 **kwargs):
        """data: (PygFeatureStore, GraphStore) or (HeteroFeatureStore, HeteroGraphStore), as for PyG's NodeLoader.
        node_sampler: gpuio.pyg.NeighborSampler or HeteroNeighborSampler. seed: of the shuffle. sample_workers:
        sampling processes (0: the main process samples); start_method: theirs (default fork, spawn for a
        CUDA sampler). Other keywords go to PyG's NodeLoader / torch's DataLoader (transform, input_id,
        prefetch_factor, timeout (default WORKER_TIMEOUT_S_DEFAULT with workers), persistent_workers
        (default True with workers), pin_memory, ...). `close()` stops the workers."""
        method = check_sample_workers(sample_workers, start_method, node_sampler.device)
        taken = sorted(set(kwargs) & set(self._OWN))
        if taken:
            raise ValueError(f"gpuio.pyg.NodeLoader sets {', '.join(taken)} itself (sample_workers= and "
                             f"start_method= choose the workers)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        # a generator of its own: torch draws each iteration's worker seed from it, not from the global RNG
        # (which the training loop's dropout draws from: it must not depend on the number of workers)
        kwargs.setdefault("generator", torch.Generator())
        if sample_workers:
            kwargs = dict(dict(persistent_workers=True, timeout=WORKER_TIMEOUT_S_DEFAULT), **kwargs)
            kwargs["multiprocessing_context"] = method
        n = int(get_input_nodes(data, input_nodes, kwargs.get("input_id"))[1].numel())
        super().__init__(data, node_sampler, input_nodes=input_nodes, filter_per_worker=False,
                         num_workers=sample_workers,
                         batch_sampler=_SerialBatches(n, batch_size, shuffle, seed, drop_last), **kwargs)
        self.sample_workers = sample_workers
        # what the workers get (under spawn, pickled): the keys and the sampler with the input ids, no store.
        # DataLoader refuses a new `dataset` after __init__ and PyG passes its own range(): set around that.
        object.__setattr__(self, "dataset", _KeyItems())
        self.collate_fn = _SampleBatch(self.input_data, node_sampler)

    def close(self) -> None:
        """Stop the sampling processes, if any (idempotent)."""
        stop_workers(self)

__all__ = ["NodeLoader"]
