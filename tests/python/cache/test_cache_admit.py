"""MIN's eviction and bypass with the window's next uses (PageCache.admit, TableCache._admit): the pages
kept are the ones needed soonest, checked by hand and against gpuio_apps.bench.belady on random traces."""
import random

import pytest
import torch

from gpuio.cache import TableCache, InMemoryRows
from gpuio_apps.bench.belady import group_min_misses
from gpuio.cache.page_cache import NO_USE, PageCache

SEED = 5


def _cache(pages: list, slots: int) -> PageCache:
    c = PageCache(num_pages=32, num_slots=slots, page_rows=1, row_shape=(1,), dtype=torch.float32, device="cpu")
    if pages:
        p = torch.tensor(pages)
        c.install(p, torch.arange(len(pages)), p.float().view(-1, 1, 1))
    return c


def _admitted(c: PageCache, incoming: list, nxt: dict, hold=()) -> tuple[set, set]:
    """(pages installed, pages evicted) when `incoming` pages are read; nxt: page -> next use."""
    inc = torch.tensor(incoming)
    slot_next = torch.tensor([nxt.get(int(p), NO_USE) if p >= 0 else NO_USE for p in c.slot_page.tolist()])
    held = torch.zeros(c.num_slots, dtype=torch.bool)
    held[list(hold)] = True
    before = set(c.resident_pages().tolist())
    chosen, victims = c.admit(torch.tensor([nxt.get(p, NO_USE) for p in incoming]), slot_next, held)
    assert victims.numel() == (inc.numel() if chosen is None else chosen.numel())
    assert victims.unique().numel() == victims.numel()
    pages = inc if chosen is None else inc[chosen]
    c.install(pages, victims, pages.float().view(-1, 1, 1))
    c.check_invariants()
    after = set(c.resident_pages().tolist())
    return after - before, before - after


def test_admit_keeps_the_pages_needed_soonest():
    c = _cache([1, 2, 3], 3)  # page 1 next needed at 5, page 2 at 2, page 3 never (known)
    nxt = {1: 5, 2: 2, 10: 1, 11: 7, 12: 3}  # incoming 10, 11, 12, 13 (13: no known use)
    installed, evicted = _admitted(c, [10, 11, 12, 13], nxt)
    # MIN keeps the 3 soonest of {1:5, 2:2, 3:-, 10:1, 11:7, 12:3, 13:-}: 10, 2, 12
    assert installed == {10, 12} and evicted == {3, 1}


def test_admit_bypasses_pages_needed_later_than_every_resident():
    c = _cache([1, 2], 2)
    installed, evicted = _admitted(c, [7, 8], {1: 3, 2: 4, 7: 5, 8: 9})
    assert installed == set() and evicted == set()
    installed, evicted = _admitted(c, [7], {1: 3, 2: 4, 7: 4})  # a tie keeps the resident
    assert installed == set()


def test_admit_fills_empty_slots_first_and_replaces_unused_pages_by_the_policy():
    c = _cache([1], 3)  # two empty slots
    installed, evicted = _admitted(c, [5, 6, 7], {1: 2})
    assert evicted == set() and len(installed) == 2  # empty slots take two; page 1 is needed
    # no known uses at all: the policy replaces unheld slots, held ones (this group's hits) stay
    c = _cache([1, 2, 3], 3)
    installed, evicted = _admitted(c, [8, 9], {}, hold=[0])
    assert evicted == {2, 3} and installed == {8, 9}
    installed, evicted = _admitted(c, [4], {4: 0}, hold=[0, 1, 2])  # a known use beats a held unknown one
    assert installed == {4} and len(evicted) == 1


def test_admit_pairs_with_the_known_use_tier_when_the_policy_gives_fewer_victims():
    c = _cache([1, 2], 3)  # page 1 next needed at 5, page 2 at no known time, one empty slot
    choose = c.choose_victims
    c.choose_victims = lambda k, pinned: choose(k, pinned | (c.slot_page >= 0))  # only empty slots
    installed, evicted = _admitted(c, [10, 11], {1: 5})  # no known use: never over page 1 (needed at 5)
    assert len(installed) == 1 and evicted == set()
    c = _cache([1, 2], 3)
    choose = c.choose_victims
    c.choose_victims = lambda k, pinned: choose(k, pinned | (c.slot_page >= 0))
    installed, evicted = _admitted(c, [10, 11, 12], {1: 5, 10: 1, 11: 2, 12: 9})
    assert installed == {10, 11} and evicted == {1}  # page 2 stays (the policy's word); 12 bypasses


def _store_misses(batches: list, slots: int, window: int) -> int:
    table = torch.arange(64, dtype=torch.float32).view(64, 1).repeat(1, 1024)  # 4 KiB rows: a row per page
    fs = TableCache(InMemoryRows(table), gpu_cache_bytes=slots * 4096, window=window, accumulate=False,
                      device="cpu")
    for b in batches[:window]:
        fs.announce(torch.tensor(b))
    for i, b in enumerate(batches):
        if i + window < len(batches):
            fs.announce(torch.tensor(batches[i + window]))
        assert torch.equal(fs.gather(torch.tensor(b)), table[b])
        fs.cache.check_invariants()
    return fs.stats()["pages_miss"]


def test_store_reads_what_min_reads_by_hand():
    # 3 slots; after batch 0 (pages 0 1 2 3) MIN keeps 0, 1, 3 (needed by batches 1 and 2), bypasses 2
    batches = [[0, 1, 2, 3], [0, 4], [1, 3], [2, 4]]
    assert group_min_misses(batches, 3) == 6
    assert _store_misses(batches, 3, window=4) == 6
    assert _store_misses(batches, 3, window=0) > 6  # clock alone keeps the wrong pages


@pytest.mark.parametrize("trial", range(6))
def test_store_with_the_whole_future_announced_reads_what_min_reads(trial):
    rng = random.Random(SEED * 100 + trial)
    print(f"seed={SEED * 100 + trial}")
    pages = rng.randint(8, 40)
    batches = [sorted(set(int(pages * rng.random() ** 2) for _ in range(rng.randint(1, 10))))
               for _ in range(rng.randint(5, 30))]
    slots = rng.randint(1, 8)
    assert _store_misses(batches, slots, window=len(batches)) == group_min_misses(batches, slots)
