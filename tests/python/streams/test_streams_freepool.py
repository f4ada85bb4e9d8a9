"""FreePool.find against a brute-force next-fit reference over seeded random alloc/free sequences (the
cursor fast path and the windowed run scan must both give the first fitting run at or after the cursor,
then wrap to the first one from the data start)."""
from __future__ import annotations

import numpy as np
import pytest

from gpuio.streams.freepool import FreePool


def _reference(pool: FreePool, n: int) -> int:
    def first(lo, hi):
        for p in range(lo, hi - n + 1):
            if not pool.used[p:p + n].any():
                return p
        return -1
    if n > pool.free_blocks:
        return -1
    hit = first(pool._cursor, pool.total_blocks)
    return hit if hit >= 0 else first(pool.reserved_blocks, min(pool._cursor + n, pool.total_blocks))


@pytest.mark.parametrize("seed", range(6))
def test_find_is_next_fit(seed):
    rng = np.random.default_rng(seed)
    pool = FreePool(int(rng.integers(200, 40000)), int(rng.integers(1, 50)))
    held = []
    for step in range(300):
        if held and rng.random() < 0.45:
            start, n = held.pop(int(rng.integers(len(held))))
            pool.free(start, n)
            continue
        n = int(rng.integers(1, 64))
        want = _reference(pool, n)
        assert pool.find(n) == want, f"seed {seed} step {step}: find({n}) at cursor {pool._cursor}"
        if want >= 0:
            assert pool.alloc(n) == want
            held.append((want, n))
    assert pool.free_blocks == pool.total_blocks - pool.reserved_blocks - sum(n for _, n in held)
