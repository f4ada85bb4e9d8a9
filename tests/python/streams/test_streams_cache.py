"""DatasetCache: fill once, stream back every epoch; replacing a fill frees the old stream; reopen by id."""
from __future__ import annotations

import numpy as np
import pytest

from gpuio.streams import DatasetCache
from streams_util import SMALL


def test_cache_epochs_and_refill(tmp_path):
    path = str(tmp_path / "c.bin")
    batches = [np.full((100, 8), i, dtype=np.float32) for i in range(20)]
    calls = []

    def make():
        calls.append(1)
        return iter(batches)

    with DatasetCache(path, mode="c", create_bytes=8 << 20, **SMALL) as c:
        with pytest.raises(ValueError, match="cache is empty"):
            next(iter(c))
        c.get_or_fill(make)
        c.get_or_fill(make)
        assert len(calls) == 1
        for _ in range(3):
            got = list(c)
            assert len(got) == 20 and all(np.array_equal(a, b) for a, b in zip(batches, got))
        sid = c.stream_id
        free = c.store.stats()["free_blocks"]
        c.fill(b[:1] for b in batches)  # a new fill replaces the old one
        assert sid not in c.store and len(c) == 20 and c.store.stats()["free_blocks"] > free
        c.store.check()
        sid = c.stream_id
    with DatasetCache(path, stream_id=sid, **SMALL) as c:
        assert [b.shape for b in c] == [(1, 8)] * 20
    with pytest.raises(KeyError, match="stream 999"):
        DatasetCache(path, stream_id=999, **SMALL)
