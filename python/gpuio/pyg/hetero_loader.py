"""`HeteroBatchLoader`: sampled heterogeneous mini-batches whose features (one table per node type) are
fetched ahead of training — the heterogeneous counterpart of `gpuio.loader.NodeBatchLoader`.

The producer samples ahead: each sampled batch is announced at once to every type's `gpuio.TableCache`
window, but its rows are submitted only `lookahead` batches later — so when a batch is served, the pages
the next `lookahead` batches need, and when, are known to its eviction and admission (announcing right
before submitting would tell only the batch being served). The look-ahead ramps up over an iteration's
first batches (`gpuio.loader.ramped_lookahead`, shared with NodeBatchLoader), so the first batch is
submitted at once instead of after `lookahead` more are sampled. Submitted rows may be merged with other
batches' misses by the accumulator; up to `depth` submitted batches wait before the oldest is finished
and handed out. `background=True` runs the producer in a thread (sampling and I/O overlap
compute); `background=False` runs it inline on the caller's thread (same batches, same order, no
overlap — for platforms where reads must be issued from the training thread).

Data parallelism: with `world_size` > 1 every rank shuffles the seeds with the same seed, cuts them into
the same global batches, and takes batches rank, rank + world_size, ... (the same count on every rank,
the remainder dropped), so each rank reads its own mini-batches from the same files. `max_batches`
sets the batches per iteration, across epochs when it exceeds one (each epoch reshuffled).

Sampling: batch i (counted over the loader's iterations) is sampled with a generator of its own, seeded
from the sampler's seed and i, so the samples do not depend on timing or on `sample_threads`: that many
threads sample the coming batches in parallel (torch ops release the GIL), at most `sample_threads`
batches ahead of the producer, which takes them in order — announcing, submitting and serving stay as
above. `sample_workers=N` samples in N worker processes instead (gpuio.loader.SampleWorkers: start
method fork by default, spawn for a sampler on a CUDA device), the same batches again, while the producer
in the main process announces, submits and gathers through the feature stores as above (GraphBolt's
split: GPU caches stay in the process that owns them). `times["sample_s"]` is the producer's wait for
sampled batches.

`trace`: a dict filled with, per node type, the list of each served batch's requested node ids (in
serving order) — the row-access trace an offline optimum (Belady's MIN) is computed from.
Thread contract: while an iteration runs, the producer (and its sampling threads, through the sampler)
is the only caller of the sampler and stores.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch

from gpuio.loader import (SampleWorkers, _SamplingLoader, background, batch_generator, check_sample_workers,
                          fetch_ahead, hand_over, ready_event, worker_stream)
from gpuio.rows import OnDevice, SupportsLookahead

SAMPLE_THREADS_DEFAULT = 4  # threads sampling the coming batches (see the module docstring)


class _HeteroSample:
    """HeteroBatchLoader's sampling task: batch `serial` of `input_type` seeds, with its own generator."""

    def __init__(self, sampler, input_type: str):
        self.sampler, self.input_type = sampler, input_type

    def __call__(self, serial: int, seeds: torch.Tensor):
        s = self.sampler
        return s.sample(seeds, self.input_type, generator=batch_generator(s.seed, serial, s.device))


@dataclass
class HeteroBatch:
    """One mini-batch of a `HeteroBatchLoader` (fields below; `y` is None without labels)."""

    x: dict  # node type -> features of n_id[type], on the loader's device
    edge_index: dict  # edge type -> [2, E] local ids (row: source type, col: destination type)
    n_id: dict  # node type -> global ids; input type: the first batch_size are the seeds
    batch_size: int
    y: torch.Tensor | None  # labels of the seeds
    ready: object = None  # CUDA: event on the loader's stream after the batch was made (gpuio.loader)

    def _hand_over(self) -> None:
        hand_over(self.ready, [*self.x.values(), *self.edge_index.values(), *self.n_id.values(), self.y])
        self.ready = None


class HeteroBatchLoader(_SamplingLoader):
    """Iterates `HeteroBatch`es: seeds of `input_type` sampled by a `HeteroNeighborSampler`, features of every
    node type fetched from `features` ahead of use (see the module docstring); `len()` is batches per
    iteration, `times` the last iteration's sample/feature/stall seconds."""

    def __init__(self, sampler, features: dict, input_nodes, input_type: str = "paper",
                 batch_size: int = 1024, labels=None, shuffle: bool = True, seed: int = 0, depth: int = 4,
                 device=None, rank: int = 0, world_size: int = 1, max_batches: int | None = None,
                 background: bool = True, trace: dict | None = None, lookahead: int = 4,
                 sample_threads: int = SAMPLE_THREADS_DEFAULT, sample_workers: int = 0,
                 start_method: str | None = None, worker_options: dict | None = None):
        """sampler: a gpuio.pyg.HeteroNeighborSampler. features: node type -> gpuio.TableCache (or any row
        source with gather(idx)), one for every node type of the graph (else KeyError). input_nodes: seed ids
        of `input_type`; labels: their labels indexed by node id. depth: finished batches queued ahead;
        lookahead: batches announced to the feature stores' windows before their rows are submitted, once
        ramped up (gpuio.loader.ramped_lookahead; the windows must exceed lookahead + depth, else ValueError).
        rank/world_size: data parallelism. sample_threads: threads sampling ahead (>= 1). sample_workers:
        processes sampling ahead instead (default 0: threads), started with `start_method` (fork by
        default, spawn for a CUDA sampler), worker_options: further torch DataLoader arguments
        (gpuio.loader.SampleWorkers); `close()` stops them."""
        if batch_size < 1 or depth < 1:
            raise ValueError(f"batch_size and depth must be >= 1, got {batch_size}, {depth}")
        if isinstance(sample_threads, bool) or not isinstance(sample_threads, int) or sample_threads < 1:
            raise ValueError(f"sample_threads must be an int >= 1, got {sample_threads!r}")
        check_sample_workers(sample_workers, start_method, sampler.device)
        if lookahead < 0:
            raise ValueError(f"lookahead must be >= 0 batches, got {lookahead}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must lie in [0, world_size={world_size}), got {rank}")
        missing = [nt for nt in sampler.graph.num_nodes if nt not in features]
        if missing:
            raise KeyError(f"features has no table for node types {missing}")
        self.sampler, self.features, self.input_type = sampler, features, input_type
        self.input_nodes = torch.as_tensor(input_nodes).long().cpu()
        self.batch_size, self.labels, self.shuffle, self.depth = batch_size, labels, shuffle, depth
        first = next(iter(features.values()))
        self.device = torch.device(device if device is not None else first.device if isinstance(first, OnDevice)
                                   else "cpu")
        self.seed, self.epoch, self.rank, self.world_size = seed, 0, rank, world_size
        self.max_batches, self.background, self.trace = max_batches, background, trace
        self.lookahead, self.sample_threads = lookahead, sample_threads
        self._serial = 0  # batches sampled by earlier iterations (each batch's generator follows it)
        windows = [f.window_batches for f in features.values() if isinstance(f, SupportsLookahead)]
        # announced-but-unserved batches reach lookahead + depth + 1; a smaller window protects only the oldest
        too_small = [w for w in windows if lookahead and w <= lookahead + depth]
        if too_small:
            raise ValueError(f"lookahead {lookahead} with depth {depth} needs feature-store windows > "
                             f"{lookahead + depth} batches, got window={too_small[0]}")
        self.times = dict(sample_s=0.0, feature_s=0.0, stall_s=0.0)
        self.sample_workers = sample_workers
        self._workers = (SampleWorkers(_HeteroSample(sampler, input_type), sample_workers, start_method,
                                       worker_options, sampler.device) if sample_workers else None)

    def _epoch_batches(self) -> list:
        nodes = self._epoch_seeds()
        self.epoch += 1
        batches = list(torch.split(nodes, self.batch_size))
        per_rank = len(batches) // self.world_size if self.world_size > 1 else len(batches)
        return batches[self.rank::self.world_size][:per_rank]

    def _seed_batches(self) -> list:
        """One epoch's batches; with max_batches, exactly that many (following epochs reshuffled)."""
        out = self._epoch_batches()
        while self.max_batches is not None and out and len(out) < self.max_batches:
            out += self._epoch_batches()
        return out if self.max_batches is None else out[:self.max_batches]

    def _per_epoch(self) -> int:
        n = -(-self.input_nodes.numel() // self.batch_size)
        return n // self.world_size if self.world_size > 1 else n

    def __len__(self) -> int:
        n = self._per_epoch()
        return n if self.max_batches is None or n == 0 else self.max_batches

    def __iter__(self):
        self.times = dict(sample_s=0.0, feature_s=0.0, stall_s=0.0)
        seeds = self._seed_batches()
        first = self._serial
        self._serial += len(seeds)
        workers = None  # started here, on the caller's thread (gpuio.loader.SampleWorkers)
        if self._workers is not None:
            workers = self._workers.samples([(first + i, s) for i, s in enumerate(seeds)])
        if not self.background:
            yield from self._produce(seeds, threading.Event(), first, workers)
            return
        yield from background(lambda stop: self._produce(seeds, stop, first, workers), len(seeds), self.depth,
                              self.times, self.device)

    def _sample(self, s, serial):
        return _HeteroSample(self.sampler, self.input_type)(serial, s)

    def _sample_on_worker(self, s, serial):
        """On a sampling thread; CUDA: on a stream of its own, finished before the producer takes it."""
        dev = self.sampler.device
        with worker_stream(dev):
            out = self._sample(s, serial)
            if dev.type == "cuda":
                torch.cuda.current_stream(dev).synchronize()
        return out

    @staticmethod
    def _adopt(sampled) -> None:
        """On the producer: its stream owns the sampled tensors made on a sampling thread's stream."""
        for part in (sampled.node, sampled.row, sampled.col, sampled.edge):
            for t in part.values():
                if t.is_cuda:
                    t.record_stream(torch.cuda.current_stream(t.device))

    def _sampled(self, seeds, stop: threading.Event, first: int):
        """The batches' samples in order, sampled by `sample_threads` threads at most that many ahead."""
        if self.sample_threads == 1:
            for i, s in enumerate(seeds):
                yield self._sample(s, first + i)
            return
        pool = ThreadPoolExecutor(self.sample_threads, thread_name_prefix="gpuio-sample")
        futures: deque = deque()
        try:
            nxt = 0
            for _ in seeds:
                while nxt < len(seeds) and len(futures) <= self.sample_threads:
                    futures.append(pool.submit(self._sample_on_worker, seeds[nxt], first + nxt))
                    nxt += 1
                if stop.is_set():
                    return
                sampled = futures.popleft().result()
                self._adopt(sampled)
                yield sampled
        finally:
            for f in futures:
                f.cancel()
            pool.shutdown(wait=True)

    def _produce(self, seeds, stop: threading.Event, first: int, workers=None):
        samples = self._sampled(seeds, stop, first) if workers is None else (s for s in workers)
        try:
            yield from self._produce_from(seeds, stop, samples)
        finally:  # an iteration left early stops its sampling threads
            samples.close()

    def _produce_from(self, seeds, stop: threading.Event, samples):
        yield from fetch_ahead(seeds, samples, stop, self.times, self.lookahead, self.depth, self._announce,
                               self._submit, self._ready, self._finish)

    def _announce(self, sampled) -> None:
        for nt, ids in sampled.node.items():
            if isinstance(self.features[nt], SupportsLookahead):
                self.features[nt].announce(ids)

    @staticmethod
    def _ready(item) -> bool:
        return all(isinstance(t, torch.Tensor) or t.done() for t in item[2].values())

    def _submit(self, s, sampled):
        tickets = {}
        for nt, ids in sampled.node.items():
            store = self.features[nt]
            if self.trace is not None:
                self.trace.setdefault(nt, []).append(ids.cpu())
            tickets[nt] = store.submit(ids) if isinstance(store, SupportsLookahead) else store.gather(ids.cpu())
        return s, sampled, tickets

    def _finish(self, s, sampled, tickets) -> HeteroBatch:
        t0 = time.perf_counter()
        x = {nt: (t if isinstance(t, torch.Tensor) else t.wait()).to(self.device, non_blocking=True)
             for nt, t in tickets.items()}
        self.times["feature_s"] += time.perf_counter() - t0
        ei = {et: torch.stack([sampled.row[et], sampled.col[et]]).to(self.device) for et in sampled.row}
        y = self.labels[s].to(self.device) if self.labels is not None else None
        batch = HeteroBatch(x, ei, sampled.node, s.numel(), y)
        if self.background:
            batch.ready = ready_event(self.device)
        return batch

__all__ = ["SAMPLE_THREADS_DEFAULT", "HeteroBatch", "HeteroBatchLoader"]
