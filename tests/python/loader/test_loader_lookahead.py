"""NodeBatchLoader samples the store's window of batches ahead: each batch is announced when sampled and
submitted `window` batches later (ramped up over an epoch's first batches: the first is submitted at once);
batches, features and order stay those of window 0; the window protects the nearest announced batches and
nothing blocks when they need more pages than the cache."""

import pytest
import torch

from gpuio.cache import TableCache, InMemoryRows
from gpuio.cache.page_cache import NO_USE
from gpuio.cache.window import WindowBuffer
from gpuio_apps.data import synthetic_graph
from gpuio.loader import NodeBatchLoader, ramped_lookahead
from gpuio.pyg import NeighborSampler
from loader_util import expected_order, log_calls
from repo_scripts import load_script

SEED = 3


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    path = tmp_path_factory.mktemp("g") / "f.npy"
    data = synthetic_graph(path, num_nodes=3000, num_edges=20000, num_features=16, num_classes=4, seed=SEED,
                           split=(0.5, 0.1, 0.1))
    table = data.features.gather(torch.arange(data.num_nodes))
    data.features.close()
    return data, table


def _store(table, window, cache_pages=8, policy="clock", inflight=32):
    return TableCache(InMemoryRows(table), gpu_cache_bytes=cache_pages * 4096, window=window,
                        accumulate=True, inflight_pages_min=inflight, policy=policy, device="cpu")


def _loader(data, store, **kw):
    sampler = NeighborSampler(data.edge_index, [5, 3], seed=SEED, num_nodes=data.num_nodes)
    return NodeBatchLoader(sampler, store, data.train_idx, 64, labels=data.y, seed=SEED, device="cpu", **kw)


def test_window_8_yields_the_batches_of_window_0(graph):
    data, table = graph
    runs = []
    for window in (0, 8):
        store = _store(table, window)
        loader = _loader(data, store)
        assert loader.lookahead() == window
        runs.append(list(loader) + list(loader))  # two epochs: the second reshuffled
        assert store.stats()["window_batches"] == 0 and store.stats()["batches_pending"] == 0
    a, b = runs
    assert len(a) == len(b) == 2 * -(-data.train_idx.numel() // 64)
    for x, y in zip(a, b):
        assert torch.equal(x.n_id, y.n_id) and torch.equal(x.edge_index, y.edge_index)
        assert torch.equal(x.y, y.y) and x.batch_size == y.batch_size
        assert torch.equal(x.x, y.x) and torch.equal(x.x, table[x.n_id])  # features are the table's rows


@pytest.mark.parametrize("window", [0, 1, 2, 8, 29])
def test_ramp_starts_at_zero_and_grows_by_at_most_one_a_batch_to_the_window(window):
    r = [ramped_lookahead(i, window) for i in range(4 * window + 4)]
    assert r[0] == 0  # the first batch is submitted as soon as it is sampled
    assert all(0 <= b - a <= 1 for a, b in zip(r, r[1:]))  # at most one submission held back per batch sampled
    assert all(x <= i for i, x in enumerate(r)) and max(r) == window == r[-1]  # reaches the window, no further
    assert r.index(window) <= 2 * window  # the full look-ahead within the epoch's first 2 x window batches


@pytest.mark.parametrize("window", [0, 1, 8])
def test_each_batch_is_announced_window_batches_before_it_is_submitted(graph, window):
    data, table = graph
    store = _store(table, window)
    log = log_calls(store)
    batches = list(_loader(data, store))
    announced = [r for k, r in log if k == "a"]
    submitted = [r for k, r in log if k == "s"]
    assert len(announced) == len(submitted) == len(batches)
    for i, b in enumerate(batches):  # announced and submitted in batch order
        assert torch.equal(announced[i], b.n_id) and torch.equal(submitted[i], b.n_id)
    kinds = "".join(k for k, _ in log)
    n = len(batches)
    ramp = next(i for i in range(n) if ramped_lookahead(i, window) == window)
    assert n > ramp + 1 and kinds == expected_order(n, window)
    assert kinds.startswith("as")  # the epoch's first batch is submitted as soon as it is sampled
    # after the ramp every announcement comes with the submission of the batch `window` earlier, the last
    # `window` batches are submitted at the end
    assert kinds.endswith("as" * (n - ramp - 1) + "s" * window)
    assert kinds != "a" * window + "as" * (n - window) + "s" * window or window == 0  # not the unramped order


class _Clock:
    """A clock the test moves: the loader's time.perf_counter reads it, the wrapped calls advance it."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def test_sample_time_excludes_feature_time(graph, monkeypatch):
    """The loader's sample_s is the sampler's time and feature_s the feature calls', counted on a clock the test
    moves (each sample 1 s, each submit 100 s), so the split is exact however loaded the machine."""
    import gpuio.loader

    clock = _Clock()
    monkeypatch.setattr(gpuio.loader, "time", clock)
    data, table = graph
    store = _store(table, 8)
    loader = _loader(data, store)
    sample, submit = loader.sampler.sample, store.submit

    def sample_1s(s, **kw):
        clock.now += 1.0
        return sample(s, **kw)

    def submit_100s(idx, force=False):
        clock.now += 100.0
        return submit(idx, force)
    loader.sampler.sample = sample_1s
    store.submit = submit_100s
    n = sum(1 for _ in loader)
    assert n > 1 and loader.times["sample_s"] == 1.0 * n  # the sampler's time, not the submits'
    assert loader.times["feature_s"] == 100.0 * n  # each batch submitted once


def test_window_protects_the_nearest_announcements_and_releases_in_order():
    w = WindowBuffer(10, 2, "cpu")
    for pages in ([0, 1], [1, 2], [3], [4]):  # four announced, two protected: the two served soonest
        w.announce(torch.tensor(pages))
    no = NO_USE
    assert w.next_use.tolist() == [0, 0, 1, no, no, no, no, no, no, no] and w.waiting == 2
    w.release_oldest()  # batch 0 served: page 1's next use is batch 1; batch 2 becomes protected
    assert w.next_use.tolist() == [no, 1, 1, 2, no, no, no, no, no, no] and w.waiting == 1
    slots = torch.tensor([3, 4, -1, 0])
    assert w.slot_next_use(slots).tolist() == [2, no, no, no]
    for _ in range(3):
        w.release_oldest()
    assert bool((w.next_use == no).all()) and not w.pending and w.protected_pages() == 0
    w.release_oldest()  # nothing announced: no-op
    assert bool((w.next_use == no).all())


def test_window_next_use_moves_to_the_next_announcement_that_needs_the_page():
    w = WindowBuffer(8, 4, "cpu")
    for pages in ([5], [5, 6], [6], [5, 7]):
        w.announce(torch.tensor(pages))
    assert w.next_use[[5, 6, 7]].tolist() == [0, 1, 3]
    w.release_oldest()
    assert w.next_use[[5, 6, 7]].tolist() == [1, 1, 3]
    w.release_oldest()  # page 5 skips batch 2, which does not need it
    assert w.next_use[[5, 6, 7]].tolist() == [3, 2, 3]
    w.announce(torch.tensor([6]))  # batch 4: page 6 keeps its sooner use
    assert w.next_use[[5, 6, 7]].tolist() == [3, 2, 3] and w.protected_pages() == 3
    w.release_oldest()
    assert w.next_use[[5, 6, 7]].tolist() == [3, 4, 3]


@pytest.mark.parametrize("policy", ["clock", "lru"])
@pytest.mark.parametrize("keep", [False, True])
def test_protected_pages_beyond_a_tiny_cache_bypass_without_blocking(graph, policy, keep):
    """Window 8 over a 2-page cache: the announced batches need far more pages than the cache holds; every
    batch still comes, with the table's rows, and the cache stays consistent."""
    data, table = graph
    store = _store(table, 8, cache_pages=2, policy=policy, inflight=4)
    if keep:
        load_script("benchmarks/belady_gnn.py").keep_on_overflow(store)
    checked = []
    choose = store.cache.choose_victims

    def victims(k, pinned):
        checked.append(int(pinned.sum()))
        out = choose(k, pinned)
        assert not bool(pinned[out].any())  # never a protected slot
        return out
    store.cache.choose_victims = victims
    loader = _loader(data, store)
    batches = list(loader)
    assert len(batches) == len(loader)
    for b in batches:
        assert torch.equal(b.x, table[b.n_id])
    store.cache.check_invariants()
    s = store.stats()
    assert max(checked) == 2  # at times every slot was protected: nothing evicted, the misses bypassed
    assert s["pages_bypass"] > 0 and s["window_batches"] == 0 and s["window_protected_pages"] == 0
