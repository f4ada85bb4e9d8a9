"""`gpuio.loader.NodeBatchLoader`: sampled mini-batches whose features are fetched ahead of training.

A worker thread samples seed batches, announces each sampled batch at once to the feature store's
window (pages the next batches need stay cached), submits its rows once the store's `window` newer
batches are sampled (the store's accumulator may merge the misses of several batches into one read), and
queues finished batches; the training loop pops them. The look-ahead ramps up over an iteration's first
batches (`ramped_lookahead`), so the first batch is not held until `window` batches are sampled.
So sampling and feature I/O of batch i+1.. overlap compute on batch i; `depth` bounds how many finished
batches wait (memory). The same sampler seed and input gives the same batches whatever the feature
source, which is how the demo compares gpuio with mmap and in-memory features.

Thread contract: the worker thread is the only caller of the sampler and the feature store while an
epoch runs. On a CUDA device the worker works on a CUDA stream of its own (so the stream-ordered waits of
its reads never hold up the training thread's kernels on the default stream) and hands each batch over
with an event: the consuming stream waits for it on the GPU, and the batch's tensors are marked as used
there (record_stream) so the caching allocator does not recycle them early.

Sampling in worker processes (`sample_workers=N`, GraphBolt's split): the sampling moves to N processes of
a persistent torch DataLoader (`SampleWorkers`) while the worker thread above, in the main process, still
announces, submits and gathers every batch through the feature store: GPU caches, window and accumulator
stay in the one process that owns them. Batch i is sampled with a generator of its own
(`batch_generator(sampler seed, i)`, i counted over the loader's iterations), in whichever process, so the
batches are the same with 0, 1 or N sampling workers. Start method: "fork" by default (the children
inherit the sampler; it must hold no CUDA state: CUDA cannot be used in a forked child), "spawn" by default
for a sampler on a CUDA device (the sampler is pickled; each worker makes a CUDA context of its own);
either may be named, "forkserver" too. Samples cross back on the CPU and move to the sampler's device in
the main process.
"""
from __future__ import annotations

import contextlib
import copy
import queue
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass

import torch

from gpuio.rows import OnDevice, SupportsLookahead

START_METHODS = ("fork", "spawn", "forkserver")
WORKER_TIMEOUT_S_DEFAULT = 300  # a sampling worker silent this long raises instead of stalling the loader
_SEED_MIX = 0x9E3779B97F4A7C15  # spreads (sampler seed, batch serial) over the generator's seed space


def batch_generator(seed: int, serial: int, device) -> torch.Generator:
    """The generator batch number `serial` of a loader over a sampler seeded `seed` samples with."""
    g = torch.Generator(device=device)
    g.manual_seed((int(seed) * _SEED_MIX + serial) % (1 << 63))
    return g


@contextlib.contextmanager
def worker_stream(device: torch.device):
    """On a loader's worker thread: a CUDA stream of its own for everything it launches (CPU: nothing)."""
    if device.type != "cuda":
        yield
        return
    with torch.cuda.device(device), torch.cuda.stream(torch.cuda.Stream(device)):
        yield


def ready_event(device: torch.device):
    """On the worker, after a batch is made: an event on its stream (None on the CPU)."""
    if device.type != "cuda":
        return None
    e = torch.cuda.Event()
    e.record()
    return e


def hand_over(event, tensors) -> None:
    """On the consumer: its current stream waits for `event` and owns `tensors` (record_stream), so the
    caching allocator does not recycle them while the consumer's kernels still read them."""
    if event is None:
        return
    stream = None
    for t in tensors:
        if t is not None and t.is_cuda:
            if stream is None:
                stream = torch.cuda.current_stream(t.device)
                stream.wait_event(event)
            t.record_stream(stream)


@dataclass
class NodeBatch:
    x: torch.Tensor  # features of n_id, on the loader's device
    edge_index: torch.Tensor  # local ids, [2, E]
    n_id: torch.Tensor  # global node ids; the first batch_size are the seeds
    batch_size: int
    y: torch.Tensor | None  # labels of the seeds
    ready: object = None  # CUDA: torch.cuda.Event recorded on the loader's stream after the batch was made

    def _hand_over(self) -> None:
        """On the consumer's thread: its current stream waits for the batch and owns its tensors."""
        hand_over(self.ready, (self.x, self.edge_index, self.n_id, self.y))
        self.ready = None


def ramped_lookahead(i: int, lookahead: int) -> int:
    """The look-ahead batch number i of an iteration (from 0) is sampled under: batches announced before
    the oldest announced one is submitted. min(lookahead, i // 2): one submission every second batch
    sampled until the full look-ahead is reached (batch 2 x lookahead). With the full look-ahead from
    the start an iteration's first batch reached the trainer only after `lookahead` batches were sampled
    (the IGBH job on an H100 with its structure on storage: first step at 13.3 s against 4.7 s in
    memory). Why every second batch: a batch handed out per 2 sampled keeps the trainer fed when sampling
    a batch takes up to half a step (a cold structure cache); one per 4 left it waiting, one per 4/3 read
    more bytes for nothing (docs/archive/results/RESULTS_HETERO.md, "Look-ahead ramp"). Used by both loaders
    (NodeBatchLoader, gpuio.pyg.HeteroBatchLoader); only when rows are submitted depends on it, never
    which batches or their order."""
    return min(lookahead, i // 2)


def to_device(out, device: torch.device):
    """`out` (a sampler's output: tensors, dicts/lists/tuples of them, or an object holding them) with every
    tensor on `device`; objects are copied, never changed in place."""
    if isinstance(out, torch.Tensor):
        return out.to(device)
    if isinstance(out, dict):
        return {k: to_device(v, device) for k, v in out.items()}
    if isinstance(out, (list, tuple)) and not hasattr(out, "_fields"):
        return type(out)(to_device(v, device) for v in out)
    if hasattr(out, "__dict__") and not isinstance(out, type):
        moved = copy.copy(out)
        for k, v in vars(out).items():
            setattr(moved, k, to_device(v, device))
        return moved
    return out


class _SampleDataset(torch.utils.data.Dataset):
    """The worker side of `SampleWorkers`: item (serial, seeds) -> task(serial, seeds), on the CPU."""

    def __init__(self, task):
        self.task = task

    def __getitem__(self, key):
        serial, seeds = key
        return to_device(self.task(serial, seeds), torch.device("cpu"))


class Keys(torch.utils.data.Sampler):
    """A DataLoader's sampler whose keys the main process sets before each iteration (`keys`): persistent
    workers go on with whatever the next iteration asks for."""

    def __init__(self):
        self.keys: list = []

    def __iter__(self):
        return iter(self.keys)

    def __len__(self) -> int:
        return len(self.keys)


def stop_workers(loader) -> None:
    """Stop a torch DataLoader's persistent workers now, not when it is collected (idempotent; a PyG loader's
    too: its iterator wraps torch's)."""
    it = getattr(loader, "_iterator", None)
    if it is not None:
        loader._iterator = None
        inner = getattr(it, "iterator", it)
        if hasattr(inner, "_shutdown_workers"):
            inner._shutdown_workers()


def _stop_workers(box: list) -> None:
    if box:
        stop_workers(box.pop())


def check_sample_workers(workers, start_method, device: torch.device) -> str:
    """The start method `workers` sampling processes use (see the module docstring); ValueError naming a
    bad value: workers not an int >= 0, an unknown start method, fork over a sampler on a CUDA device."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"sample_workers must be an int >= 0, got {workers!r}")
    cuda = torch.device(device).type == "cuda"
    method = start_method or ("spawn" if cuda else "fork")
    if method not in START_METHODS:
        raise ValueError(f"start_method must be one of {', '.join(START_METHODS)} (or None), got {start_method!r}")
    if cuda and method == "fork" and workers:
        raise ValueError(f"start_method='fork' with a sampler on {device}: CUDA cannot be used in a forked child; "
                         f"use start_method='spawn' (the default for a CUDA sampler) or a sampler on the CPU")
    return method


class SampleWorkers:
    """Sampling in `workers` processes of a persistent torch DataLoader: `task(serial, seeds)` (a picklable
    callable; under fork simply inherited) runs there, and `samples(keys)` yields its outputs in key order,
    moved to `device` in the calling process. The processes start on the first `samples` call, from the
    calling thread, and are reused by every later one; `close()` (or dropping the object) stops them.
    options: further torch DataLoader arguments (prefetch_factor, timeout, worker_init_fn, ...; by default
    timeout=WORKER_TIMEOUT_S_DEFAULT, so a worker that hangs raises instead of stalling the loader)."""

    _OWN = ("dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "collate_fn",
            "multiprocessing_context", "drop_last")

    def __init__(self, task, workers: int, start_method: str | None = None, options: dict | None = None,
                 device=None):
        self.device = torch.device(device if device is not None else "cpu")
        self.start_method = check_sample_workers(workers, start_method, self.device)
        if workers < 1:
            raise ValueError(f"SampleWorkers needs workers >= 1, got {workers}")
        taken = sorted(set(options or {}) & set(self._OWN))
        if taken:
            raise ValueError(f"worker_options may not set {', '.join(taken)}: the loader sets them")
        # a generator of its own: torch draws each iteration's worker seed from it, not from the global RNG
        # (which the training loop's dropout draws from: it must not depend on the number of workers)
        opts = dict(persistent_workers=True, timeout=WORKER_TIMEOUT_S_DEFAULT, generator=torch.Generator())
        opts.update(options or {})
        self.workers, self._keys = workers, Keys()
        self._loader = torch.utils.data.DataLoader(_SampleDataset(task), batch_size=None, sampler=self._keys,
                                                   num_workers=workers, multiprocessing_context=self.start_method,
                                                   collate_fn=_identity, **opts)
        self._stop = weakref.finalize(self, _stop_workers, [self._loader])

    def start(self) -> None:
        """Start the worker processes now, from the calling thread (else the first `samples` call does), and
        return once each is up (persistent workers: imports done, task received)."""
        if not self._stop.alive:
            raise ValueError("these sampling workers are closed")
        self._keys.keys = []
        iter(self._loader)
        if self._loader.persistent_workers:
            iter(self._loader)  # a second iteration starts only once every worker has answered

    def samples(self, keys):
        """Start sampling `keys` ([(serial, seeds), ...]) in the workers; an iterator of the outputs in order.
        An earlier iteration left unfinished is drained first (its outstanding samples are dropped)."""
        if not self._stop.alive:
            raise ValueError("these sampling workers are closed")
        self._keys.keys = list(keys)
        it = iter(self._loader)
        device = self.device
        return (to_device(out, device) if device.type != "cpu" else out for out in it)

    def close(self) -> None:
        """Stop the worker processes (idempotent)."""
        self._stop()


def _identity(x):
    return x


class _NodeSample:
    """NodeBatchLoader's sampling task: batch `serial` sampled with its own generator (batch_generator); the
    sampler crosses to the workers as it pickles (fork: inherited)."""

    def __init__(self, sampler):
        self.sampler = sampler

    def __call__(self, serial: int, seeds: torch.Tensor):
        s = self.sampler
        return s.sample(seeds, generator=batch_generator(s.seed, serial, s.device))


class _SamplingLoader:
    """What both loaders (NodeBatchLoader, gpuio.pyg.HeteroBatchLoader) share beside their batch loop
    (fetch_ahead): an epoch's seeds in its shuffled order, and the sampling processes' start and stop."""

    input_nodes: torch.Tensor
    shuffle: bool
    seed: int
    epoch: int
    _workers: SampleWorkers | None

    def _epoch_seeds(self) -> torch.Tensor:
        """input_nodes, shuffled (when shuffle) by a generator of the loader's seed and the epoch's number."""
        nodes = self.input_nodes
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed * 7919 + self.epoch)
            nodes = nodes[torch.randperm(nodes.numel(), generator=g)]
        return nodes

    def start_workers(self) -> None:
        """Start the sampling processes now (else the first iteration does): fork them before the main
        process grows, say, or outside a memory cgroup meant for the features. No-op without workers."""
        if self._workers is not None:
            self._workers.start()

    def close(self) -> None:
        """Stop the sampling processes, if any (idempotent; iterating afterwards raises ValueError)."""
        if self._workers is not None:
            self._workers.close()


class NodeBatchLoader(_SamplingLoader):
    """Mini-batches of seed nodes for GNN training: sampled subgraph plus features, made on a background thread
    depth batches ahead, the sampling optionally in worker processes (see the module docstring)."""
    def __init__(self, sampler, features, input_nodes, batch_size: int = 1024, labels=None,
                 shuffle: bool = True, seed: int = 0, depth: int = 4, device=None, sample_workers: int = 0,
                 start_method: str | None = None, worker_options: dict | None = None):
        """sampler: gpuio.pyg.NeighborSampler. features: a gpuio.TableCache (window + accumulator used)
        or any row source with gather(idx). depth: finished batches queued ahead (default 4).
        sample_workers: processes sampling the coming batches (default 0: the background thread samples);
        start_method: theirs ("fork", "spawn", "forkserver"; default fork, spawn for a CUDA sampler);
        worker_options: further torch DataLoader arguments for them (see SampleWorkers). `close()` stops
        the processes (so does dropping the loader)."""
        if batch_size < 1 or depth < 1:
            raise ValueError(f"batch_size and depth must be >= 1, got {batch_size}, {depth}")
        check_sample_workers(sample_workers, start_method, sampler.device)
        self.sampler, self.features = sampler, features
        self.input_nodes = torch.as_tensor(input_nodes).long().cpu()
        self.batch_size, self.labels, self.shuffle, self.depth = batch_size, labels, shuffle, depth
        self.device = torch.device(device if device is not None else
                                   features.device if isinstance(features, OnDevice) else "cpu")
        self.seed, self.epoch = seed, 0
        self._serial = 0  # batches sampled by earlier iterations (each batch's generator follows it)
        self.sample_workers = sample_workers
        self._workers = (SampleWorkers(_NodeSample(sampler), sample_workers, start_method, worker_options,
                                       sampler.device) if sample_workers else None)
        self.times = dict(sample_s=0.0, feature_s=0.0, stall_s=0.0)

    def __len__(self) -> int:
        return -(-self.input_nodes.numel() // self.batch_size)

    def _seed_batches(self):
        return torch.split(self._epoch_seeds(), self.batch_size)

    def __iter__(self):
        self.times = dict(sample_s=0.0, feature_s=0.0, stall_s=0.0)
        seeds = self._seed_batches()
        self.epoch += 1
        first, self._serial = self._serial, self._serial + len(seeds)
        keys = [(first + i, s) for i, s in enumerate(seeds)]
        if self._workers is not None:  # started here, on the caller's thread (see SampleWorkers)
            samples = self._workers.samples(keys)
        else:  # lazy: sampled on the worker thread
            task = _NodeSample(self.sampler)
            samples = (task(serial, s) for serial, s in keys)
        yield from background(lambda stop: self._produce(seeds, samples, stop), len(seeds), self.depth,
                              self.times, self.device)

    def lookahead(self) -> int:
        """Batches sampled and announced before their rows are submitted once the look-ahead has ramped up
        (`ramped_lookahead`): the feature store's window (0 for a store without one, or a plain row source:
        each batch is submitted as it is sampled)."""
        return self.features.window_batches if isinstance(self.features, SupportsLookahead) else 0

    def _produce(self, seeds, samples, stop: threading.Event):
        """On the worker: the one batch loop (fetch_ahead) over this loader's store; a store without a window
        (a plain row source) gathers each batch as it is sampled."""
        store = self.features
        accumulating = isinstance(store, SupportsLookahead)

        def announce(sampled) -> None:
            if accumulating:
                store.announce(sampled.node)

        def submit(s, sampled):
            return s, sampled, store.submit(sampled.node) if accumulating else store.gather(sampled.node.cpu())

        def ready(item) -> bool:
            rows = item[2]
            return isinstance(rows, torch.Tensor) or rows.done()

        yield from fetch_ahead(seeds, samples, stop, self.times, self.lookahead(), self.depth, announce, submit,
                               ready, self._finish)

    def _finish(self, s, sampled, rows) -> NodeBatch:
        if not isinstance(rows, torch.Tensor):
            t0 = time.perf_counter()
            rows = rows.wait()
            self.times["feature_s"] += time.perf_counter() - t0
        y = self.labels[s].to(self.device) if self.labels is not None else None
        batch = NodeBatch(rows.to(self.device, non_blocking=True),
                          torch.stack([sampled.row, sampled.col]).to(self.device),
                          sampled.node, s.numel(), y)
        batch.ready = ready_event(self.device)
        return batch


def fetch_ahead(seeds, samples, stop: threading.Event, times: dict, lookahead: int, depth: int, announce, submit,
                ready, finish):
    """The batch loop of both loaders (NodeBatchLoader, gpuio.pyg.HeteroBatchLoader), on their producer: take each
    batch's sample in order (`samples`, an iterator: sampled here or by the sampling threads or processes) and
    announce it at once (announce(sampled): the stores' windows learn the coming batches while they serve this
    one); submit it (submit(seeds, sampled) -> a pending item) once `ramped_lookahead(i, lookahead)` newer batches
    are sampled; hand out the oldest pending batch (finish(*item) -> the batch, waiting for its rows) when its rows
    are in (ready(item)) or more than `depth` are pending. Batches and their order do not depend on the
    look-ahead or on who samples. times["sample_s"] adds the waits for samples, times["feature_s"] the announces
    and submits (finish adds its own waits). Stops early, at a batch boundary, once `stop` is set."""
    ahead: deque = deque()  # sampled and announced, not yet submitted
    pending: deque = deque()  # submitted, not yet handed out
    for i, s in enumerate(seeds):
        if stop.is_set():
            return
        t0 = time.perf_counter()
        sampled = next(samples)
        t1 = time.perf_counter()
        times["sample_s"] += t1 - t0
        announce(sampled)
        ahead.append((s, sampled))
        while len(ahead) > ramped_lookahead(i, lookahead):
            pending.append(submit(*ahead.popleft()))
        times["feature_s"] += time.perf_counter() - t1
        while pending and (len(pending) > depth or ready(pending[0])):
            yield finish(*pending.popleft())
    # the tail keeps the pace above: one batch submitted per batch handed out. Submitting all `ahead` at once
    # held the next batch back by their whole cost (2 x H200, host-buffer hits: 3 steps of ~115 ms against ~22 ms
    # each, docs/archive/results/RESULTS_2026-11-26.md)
    while ahead or pending:
        if ahead:
            t1 = time.perf_counter()
            pending.append(submit(*ahead.popleft()))
            times["feature_s"] += time.perf_counter() - t1
        if len(pending) > depth or not ahead or ready(pending[0]):
            yield finish(*pending.popleft())


def background(produce, count: int, depth: int, times: dict, device: torch.device):
    """Runs produce(stop), a generator of batches, on a worker thread with a CUDA stream of its own, at most
    `depth` finished batches ahead; yields `count` of them on the caller's thread, each handed over to the
    caller's stream (the batch's _hand_over). times["stall_s"] adds up the caller's waits. An exception in
    the worker is raised here; closing the generator early stops the worker (stop is set, the queue drained)."""
    out: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def work() -> None:
        try:
            with worker_stream(device):
                for batch in produce(stop):
                    while not stop.is_set():
                        try:
                            out.put(batch, timeout=0.1)
                            break
                        except queue.Full:
                            continue
        except BaseException as e:  # delivered to the training loop, which re-raises it
            out.put(e)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    try:
        for _ in range(count):
            t0 = time.perf_counter()
            item = out.get()
            times["stall_s"] += time.perf_counter() - t0
            if isinstance(item, BaseException):
                raise item
            item._hand_over()
            yield item
    finally:
        stop.set()
        while worker.is_alive():  # unblock a worker waiting on a full queue
            try:
                out.get_nowait()
            except queue.Empty:
                worker.join(0.01)

__all__ = ["START_METHODS", "WORKER_TIMEOUT_S_DEFAULT", "batch_generator", "worker_stream", "ready_event", "hand_over",
           "NodeBatch", "ramped_lookahead", "to_device", "Keys", "stop_workers", "check_sample_workers",
           "SampleWorkers", "NodeBatchLoader", "background", "fetch_ahead"]
