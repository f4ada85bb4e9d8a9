"""Page cache policies: the batched tensor implementation against scalar reference models."""
import random
from collections import OrderedDict

import pytest
import torch

from gpuio.cache.page_cache import PageCache

SEED = 99


def _access(cache: PageCache, page: int) -> bool:
    """One single-page access through the batched API; True on hit."""
    pages = torch.tensor([page])
    slot = cache.lookup(pages)
    if int(slot) >= 0:
        cache.touch(slot)
        return True
    pinned = torch.zeros(cache.num_slots, dtype=torch.bool)
    victims = cache.choose_victims(1, pinned)
    cache.install(pages, victims, torch.full((1, cache.page_rows, 2), float(page)))
    return False


def _trace(n: int, pages: int, rng: random.Random) -> list[int]:
    # skewed: a few hot pages, a long tail (like sampled GNN neighbourhoods)
    return [int(pages * rng.random() ** 3) for _ in range(n)]


def test_clock_matches_scalar_clock():
    rng = random.Random(SEED)
    print(f"seed={SEED}")
    cache = PageCache(num_pages=64, num_slots=8, page_rows=1, row_shape=(2,), dtype=torch.float32,
                      device="cpu", policy="clock")
    slots, ref, where, hand = [-1] * 8, [False] * 8, {}, 0
    for step, p in enumerate(_trace(600, 64, rng)):
        if p in where:
            expect_hit = True
            ref[where[p]] = True
        else:
            expect_hit = False
            if -1 in slots:
                s = slots.index(-1)
            else:
                while ref[hand]:
                    ref[hand] = False
                    hand = (hand + 1) % 8
                s, hand = hand, (hand + 1) % 8
                del where[slots[s]]
            slots[s], ref[s], where[p] = p, True, s
        assert _access(cache, p) == expect_hit, f"step {step} page {p}"
        assert int(cache.lookup(torch.tensor([p]))) == where[p]
        cache.check_invariants()
    assert bool((cache.data[cache.page_slot[torch.tensor(list(where))].long(), 0, 0]
                 == torch.tensor(list(where), dtype=torch.float32)).all())


def test_lru_matches_ordered_dict():
    rng = random.Random(SEED + 1)
    cache = PageCache(64, 8, 1, (2,), torch.float32, "cpu", policy="lru")
    lru: OrderedDict = OrderedDict()
    for p in _trace(600, 64, rng):
        expect_hit = p in lru
        if expect_hit:
            lru.move_to_end(p)
        else:
            if len(lru) == 8:
                lru.popitem(last=False)
            lru[p] = True
        assert _access(cache, p) == expect_hit
        assert set(cache.resident_pages().tolist()) == set(lru)


@pytest.mark.parametrize("policy", ["clock", "lru", "fifo", "random"])
def test_batch_victims_respect_pins_and_capacity(policy):
    cache = PageCache(100, 10, 2, (3,), torch.float32, "cpu", policy=policy)
    pages = torch.arange(10)
    cache.install(pages, cache.choose_victims(10, torch.zeros(10, dtype=torch.bool)), torch.zeros(10, 2, 3))
    pinned = torch.zeros(10, dtype=torch.bool)
    pinned[:7] = True
    victims = cache.choose_victims(5, pinned)
    assert victims.numel() == 3  # only 3 unpinned slots exist
    assert set(victims.tolist()) == {7, 8, 9}
    cache.install(torch.tensor([50, 51, 52]), victims, torch.ones(3, 2, 3))
    cache.check_invariants()
    assert set(cache.resident_pages().tolist()) == set(range(7)) | {50, 51, 52}
    assert cache.evictions == 3


def test_bad_policy():
    with pytest.raises(ValueError, match="'mru'"):
        PageCache(10, 2, 1, (1,), torch.float32, "cpu", policy="mru")
