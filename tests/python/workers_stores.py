"""Datasets and helpers for the tests that hand gpuio's data-holding objects (stream stores, table caches, PyG stores
and samplers) to other processes. Module-level, so that spawned DataLoader workers can import them."""
from __future__ import annotations

import hashlib
import os

import numpy as np
import torch

from streams_util import contents

STREAMS, SEED = 10, 7  # streams in a test store; stream i holds contents(SEED, i)


def digest(objs) -> str:
    """sha256 over every byte of a stream's objects (arrays with dtype and shape, bytes, dicts key by key)."""
    h = hashlib.sha256()

    def feed(o):
        if isinstance(o, np.ndarray):
            h.update(f"a{o.dtype.str}{o.shape}".encode())
            h.update(np.ascontiguousarray(o).tobytes())
        elif isinstance(o, bytes):
            h.update(b"b%d:" % len(o) + o)
        elif isinstance(o, dict):
            h.update(b"d")
            for k in sorted(o):
                h.update(repr(k).encode())
                feed(o[k])
        else:
            h.update(repr(o).encode())
    for o in objs:
        feed(o)
    return h.hexdigest()


def make_stream_store(path, **options):
    """A new store holding STREAMS closed streams (ids 0..STREAMS-1, contents(SEED, i)); returns it, writable."""
    from streams_util import open_small, write_all

    store = open_small(path, mode="w", **options)
    ids = [write_all(store, contents(SEED, i)) for i in range(STREAMS)]
    assert ids == list(range(STREAMS))
    return store


def expected_digest(stream_id: int) -> str:
    return digest(contents(SEED, stream_id))


class StreamsDataset(torch.utils.data.Dataset):
    """Item i: (i, digest of every object of stream i as read by the worker through the store it received, pid)."""

    def __init__(self, store):
        self.store = store

    def __len__(self):
        return STREAMS

    def __getitem__(self, i):
        sd = self.store.open_stream(i)
        objs = []
        while (obj := self.store.read_stream(sd)) is not None:
            objs.append(obj)
        self.store.close_stream(sd)
        return i, digest(objs), os.getpid(), self.store.writable


def check_streams_loader(loader) -> set:
    """Every stream the loader's workers read has the bytes written; each worker's store is read-only (the main
    process holds the writer lock). Returns the pids that read."""
    pids, seen = set(), []
    for i, dig, pid, writable in loader:
        assert dig == expected_digest(i), f"stream {i} read back different bytes"
        assert not writable
        seen.append(i)
        pids.add(pid)
    assert sorted(seen) == list(range(STREAMS))
    return pids


class GatherDataset(torch.utils.data.Dataset):
    """Item i: (ids, rows gathered through the table cache received, pid), as workers_util.RowsDataset over a
    gpuio.TableCache (gather, no indexing); the rows handed back in host memory (a worker's CUDA tensors are
    not for another process)."""

    def __init__(self, store, rows: int):
        self.store, self.rows = store, rows

    def __len__(self):
        return self.rows

    def __getitem__(self, i):
        ids = torch.tensor([i, (i * 7) % self.rows, (i + 1) % self.rows])
        return ids, self.store.gather(ids).cpu(), os.getpid()


class SamplerSeedDataset(torch.utils.data.Dataset):
    """Item i: (the initial seed of the generator the sampler draws from in this process, pid)."""

    def __init__(self, sampler):
        self.sampler = sampler

    def __len__(self):
        return 8

    def __getitem__(self, i):
        self.sampler.sample(torch.tensor([i % self.sampler.num_nodes]))
        return self.sampler.generator.initial_seed(), os.getpid()
