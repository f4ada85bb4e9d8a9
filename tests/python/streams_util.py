"""Helpers shared by the stream store tests: a small store on a file and deterministic stream contents."""
from __future__ import annotations

import numpy as np

from gpuio.streams import StreamStore

SMALL = dict(sblock_bytes=16384, prefetch_depth=3, buffer_pool_bytes=16384 * 12, streams_max=2048)


def open_small(path, create_bytes=4 << 20, mode="c", **kw):
    opts = dict(SMALL, create_bytes=create_bytes, mode=mode)
    opts.update(kw)
    return StreamStore(str(path), **opts)


def contents(seed: int, stream_id: int) -> list:
    """The objects of stream ``stream_id`` in a run seeded ``seed``: a mix of arrays, bytes, dicts."""
    rng = np.random.default_rng([seed, stream_id])
    objs = []
    for k in range(int(rng.integers(0, 6))):
        kind = int(rng.integers(0, 3))
        if kind == 0:
            objs.append(rng.integers(0, 1 << 30, size=int(rng.integers(0, 9000)), dtype=np.int64))
        elif kind == 1:
            objs.append(rng.bytes(int(rng.integers(0, 5000))))
        else:
            objs.append({"k": k, "id": stream_id, "a": rng.random(int(rng.integers(1, 300)))})
    return objs


def same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def write_all(store, objs) -> int:
    """A new stream holding ``objs`` in order, closed (durable); its id."""
    sd = store.create_stream()
    for o in objs:
        store.write_stream(sd, o)
    store.close_stream(sd)
    return sd.stream_id


def read_all(store, stream_id: int) -> list:
    sd = store.open_stream(stream_id)
    out = []
    while (obj := store.read_stream(sd)) is not None:
        out.append(obj)
    store.close_stream(sd)
    return out
