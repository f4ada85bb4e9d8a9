"""Software page cache in device memory (BaM): a page table, slots of fixed-size pages, an eviction policy.

Every operation is a handful of tensor ops over whole batches, so the same code runs on the GPU (where
it is meant to run) and on the CPU (tests). A page is `page_rows` consecutive rows of the backing table.

Policies (victim choice when a batch needs free slots; `benchmarks/cache_policy.py` measures them):
- "clock" (default, BaM's reference): one reference bit per slot, a hand that sweeps; a batch takes
  its k victims in one vectorised sweep. Measured (benchmarks/cache_policy.py, R-MAT 200k nodes / 2M
  edges, fan-outs 25,10, 32-seed batches, 1 row per page, 2 seeds, CPU): page hit rate with the cache at
  5% / 10% of the pages: clock 0.439 / 0.551, lru 0.452 / 0.564, fifo 0.403 / 0.528, random 0.421 /
  0.549; at 25% all equal (the working set fits). Clock keeps within 1.3 points of LRU and beats FIFO
  and random, with a bit of state per slot instead of a timestamp written on every hit; per-batch
  policy time was the same within the noise of the shared CPU. So clock is the default; "lru" is one
  argument away where its extra point matters. (GPU timing: run the benchmark with --device cuda.)
- "lru": evicts the slots with the oldest last-use tick (top-k over all slots each batch).
- "fifo": evicts in insertion order; ignores reuse. "random": uniform among evictable slots.
"""
from __future__ import annotations

import torch

POLICIES = ("clock", "lru", "fifo", "random")
NO_USE = 1 << 62  # a page's next use when none is known (above every sequence number of gpuio.cache.window)


class PageCache:
    """`num_slots` pages of `page_rows` rows of `row_shape` each, for a table of `num_pages` pages.

    Thread contract: single owner (the feature store's serving thread); no internal locking.
    """

    def __init__(self, num_pages: int, num_slots: int, page_rows: int, row_shape: tuple, dtype: torch.dtype,
                 device, policy: str = "clock", seed: int = 0):
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        if num_slots < 0 or page_rows < 1 or num_pages < 0:
            raise ValueError(f"bad cache geometry: num_slots={num_slots}, page_rows={page_rows}, "
                             f"num_pages={num_pages}")
        self.device = torch.device(device)
        self.policy = policy
        self.num_pages, self.num_slots, self.page_rows = num_pages, num_slots, page_rows
        self.data = torch.empty((num_slots, page_rows, *row_shape), dtype=dtype, device=self.device)
        self.page_slot = torch.full((num_pages,), -1, dtype=torch.int32, device=self.device)
        self.slot_page = torch.full((num_slots,), -1, dtype=torch.long, device=self.device)
        self.ref = torch.zeros(num_slots, dtype=torch.bool, device=self.device)
        self.stamp = torch.zeros(num_slots, dtype=torch.long, device=self.device)  # lru: last use; fifo: insert
        self.hand = 0
        self.tick = 0
        self.evictions = 0
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)

    def lookup(self, pages: torch.Tensor) -> torch.Tensor:
        """Slot of each page (int64), -1 where not resident."""
        return self.page_slot[pages].long()

    def touch(self, slots: torch.Tensor) -> None:
        """Record a use of resident `slots` (hits)."""
        self.tick += 1
        self.ref[slots] = True
        if self.policy == "lru":
            self.stamp[slots] = self.tick

    def choose_victims(self, k: int, pinned: torch.Tensor) -> torch.Tensor:
        """Up to k distinct slots to (re)fill, never one where `pinned` (bool [num_slots]) is set.
        Empty slots go first. Fewer than k come back when too few slots are evictable."""
        if k <= 0 or self.num_slots == 0:
            return torch.empty(0, dtype=torch.long, device=self.device)
        evictable = ~pinned
        empty = evictable & (self.slot_page < 0)
        n_empty = int(empty.sum())
        if n_empty >= k:
            return empty.nonzero().flatten()[:k]
        victims_empty = empty.nonzero().flatten()
        k_rest = k - n_empty
        occupied = evictable & ~empty
        if self.policy == "clock":
            rest = self._clock(k_rest, occupied)
        else:
            rest = self._by_score(k_rest, occupied)
        return torch.cat([victims_empty, rest])

    def admit(self, incoming_next: torch.Tensor, slot_next: torch.Tensor, hold: torch.Tensor):
        """Belady's MIN with the next uses known (the window's): which of the pages just read to install,
        and into which slots. incoming_next: next use of each page read (NO_USE: none known);
        slot_next: next use of each slot's page; hold (bool per slot): pages just used, kept over an
        incoming page of unknown use. Victims in order: empty slots, then slots of no known use not held
        (chosen by the policy, `choose_victims`), then held ones, then the rest by furthest next use.
        Incoming pages go soonest first; the j-th is installed iff its next use is sooner than the j-th
        victim's (ties keep the resident: MIN's bypass). Without known uses this is the policy replacing
        every unheld slot, as before windows told uses. Returns (chosen, slots): positions in
        incoming_next to install (None: all of them, in their order) and their slots, as many of both."""
        m = incoming_next.numel()
        none = torch.empty(0, dtype=torch.long, device=self.device)
        if m == 0 or self.num_slots == 0:
            return none, none
        unknown = slot_next >= NO_USE
        free = unknown & ~hold  # empty slots too: an empty slot's next use is NO_USE
        # keys: victims go largest first; an incoming page replaces a victim with a larger key
        skey = torch.where(self.slot_page < 0, NO_USE + 3,
                           torch.where(free, NO_USE + 2, torch.where(unknown, NO_USE, slot_next)))
        ikey = torch.clamp(incoming_next, max=NO_USE + 1)
        ikey_s, iorder = torch.sort(ikey, stable=True)
        skey_s, sorder = torch.sort(skey, descending=True, stable=True)
        n = min(m, self.num_slots)
        n_free, n_in = torch.stack([free.sum(), (ikey_s[:n] < skey_s[:n]).sum()]).tolist()  # one host sync
        k = min(n_in, n_free)
        victims = self.choose_victims(k, ~free)  # empty first, then the policy
        r = victims.numel()
        if r < k:  # a policy (a wrapped choose_victims) gave fewer: pair the rest with the known-use tier
            n = min(m - r, self.num_slots - n_free)
            n_in = r + int((ikey_s[r:r + n] < skey_s[n_free:n_free + n]).sum())
        if n_in > r:
            victims = torch.cat([victims, sorder[n_free:n_free + n_in - r]])
        return (None if n_in == m else iorder[:n_in]), victims

    def _clock(self, k: int, cand: torch.Tensor) -> torch.Tensor:
        order = (self.hand + torch.arange(self.num_slots, device=self.device)) % self.num_slots
        cand_o = cand[order]
        ref_o = self.ref[order]
        zero = cand_o & ~ref_o
        n_zero = int(zero.sum())
        if n_zero >= k:
            # First lap suffices: victims are the first k unreferenced candidates from the hand; every
            # referenced candidate the hand passed loses its bit (its second chance).
            pos = zero.nonzero().flatten()[:k]
            last = int(pos[-1])
            passed = order[: last + 1]
            self.ref[passed[cand_o[: last + 1]]] = False
            self.hand = (self.hand + last + 1) % self.num_slots
            return order[pos]
        # Second lap: every candidate's bit was cleared on the first; take the rest in hand order.
        ones = (cand_o & ref_o).nonzero().flatten()[: k - n_zero]
        self.ref[order[cand_o]] = False
        if ones.numel():
            self.hand = (self.hand + int(ones[-1]) + 1) % self.num_slots
        return torch.cat([order[zero.nonzero().flatten()], order[ones]])

    def _by_score(self, k: int, cand: torch.Tensor) -> torch.Tensor:
        n = int(cand.sum())
        k = min(k, n)
        if k == 0:
            return torch.empty(0, dtype=torch.long, device=self.device)
        if self.policy == "random":
            score = torch.rand(self.num_slots, generator=self.generator, device=self.device)
        else:
            score = self.stamp.double()
        score = torch.where(cand, score, torch.full_like(score, float("inf")))
        return torch.topk(score, k, largest=False, sorted=False).indices

    def install(self, pages: torch.Tensor, slots: torch.Tensor, rows: torch.Tensor) -> None:
        """Put `pages` (distinct, not resident) into `slots` (from choose_victims); rows: [n, page_rows, ...]."""
        if pages.numel() == 0:
            return
        self.tick += 1
        old = self.slot_page[slots]
        evicted = old[old >= 0]
        self.evictions += int(evicted.numel())
        self.page_slot[evicted] = -1
        self.page_slot[pages] = slots.to(torch.int32)
        self.slot_page[slots] = pages
        self.data.index_copy_(0, slots, rows.to(self.data.dtype))  # one memcpy per page
        self.ref[slots] = True
        self.stamp[slots] = self.tick

    def resident_pages(self) -> torch.Tensor:
        """Page ids currently held in the cache, in slot order."""
        return self.slot_page[self.slot_page >= 0]

    def check_invariants(self) -> None:
        """Page table and slot map agree (used by tests and the randomized checker)."""
        res = self.slot_page >= 0
        slots = res.nonzero().flatten()
        assert bool((self.page_slot[self.slot_page[slots]].long() == slots).all()), "page table mismatch"
        assert int((self.page_slot >= 0).sum()) == int(res.sum()), "stale page table entries"

__all__ = ["POLICIES", "NO_USE", "PageCache"]
