"""One structure-cache budget for a heterogeneous graph: `split_struct_cache` gives the pointer
files their whole size first, then shares the rest over the neighbour lists by file size, never more than a
file; `HeteroGraphStore.from_dataset` and `CSCFile` use it, and the samples stay those of the in-memory
structure; `--struct-cache-mb` is the total."""
from __future__ import annotations

import random

import pytest
import torch

from gpuio.graph.csc_file import CSCFile, relation_file_bytes, split_struct_cache

MiB = 1 << 20
# the 2 M-paper IGBH relations' (colptr, row) file bytes (dev box copy, /tmp/bel15/P2M1)
P2M = [(16007168, 187899904), (16007168, 108941312), (30887936, 108941312), (30887936, 59797504),
       (241664, 59797504), (16007168, 170913792), (3047424, 170913792)]


def _check(budget, files, out):
    assert len(out) == len(files)
    total = sum(p + r for p, r in files)
    assert sum(p + r for p, r in out) == min(budget, total)
    assert all(0 <= cp <= p and 0 <= cr <= r for (p, r), (cp, cr) in zip(files, out))


def test_pointers_whole_first_then_lists_by_file_size():
    out = split_struct_cache(896 * MiB, P2M)
    _check(896 * MiB, P2M, out)
    assert [p for p, _ in out] == [p for p, _ in P2M]  # every pointer file whole
    rest, rows = 896 * MiB - sum(p for p, _ in P2M), sum(r for _, r in P2M)
    for (_, r), (_, cr) in zip(P2M, out):  # lists in proportion to their size, to the byte
        assert abs(cr - rest * r / rows) <= 1
    # the old rule's waste: 128 MiB per relation left the small relations' cache unused, the big ones short
    assert out[0][1] > 96 * MiB and out[4][1] < 96 * MiB


def test_budget_below_the_pointers_and_above_the_files():
    ptrs = sum(p for p, _ in P2M)
    out = split_struct_cache(ptrs // 2, P2M)
    _check(ptrs // 2, P2M, out)
    assert all(cr == 0 for _, cr in out)
    for (p, _), (cp, _) in zip(P2M, out):
        assert abs(cp - p / 2) <= 1
    total = sum(p + r for p, r in P2M)
    out = split_struct_cache(total + 12345, P2M)  # more than the files: each file whole, the rest unused
    assert out == [tuple(f) for f in P2M]
    assert split_struct_cache(0, P2M) == [(0, 0)] * len(P2M)
    assert split_struct_cache(5, []) == []


def test_invariants_on_random_sizes():
    rng = random.Random(7)
    for _ in range(300):
        files = [(rng.randrange(0, 1 << 20), rng.randrange(0, 1 << 24)) for _ in range(rng.randrange(1, 9))]
        budget = rng.randrange(0, int(sum(p + r for p, r in files) * 1.2) + 2)
        out = split_struct_cache(budget, files)
        _check(budget, files, out)
        ptrs = sum(p for p, _ in files)
        if budget >= ptrs:  # lists only once every pointer file is whole
            assert [cp for cp, _ in out] == [p for p, _ in files]
        else:
            assert all(cr == 0 for _, cr in out)


def test_bad_budgets_raise():
    with pytest.raises(ValueError, match="must be >= 0 bytes, got -1"):
        split_struct_cache(-1, P2M)
    with pytest.raises(ValueError, match="file sizes"):
        split_struct_cache(10, [(-1, 5)])


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    pytest.importorskip("torch_geometric")
    from gpuio_apps.data import igbh
    return igbh.generate_igbh(str(tmp_path_factory.mktemp("igbh")), igbh.IGBHConfig(papers=600, features=8, seed=3))


def test_graph_store_shares_one_budget_and_samples_as_in_memory(ds):
    from gpuio.pyg.hetero import HeteroGraphStore, HeteroNeighborSampler
    files = [relation_file_bytes(ds.relation_path(et)) for et in ds.edge_types]
    ptrs, total = sum(p for p, _ in files), sum(p + r for p, r in files)
    budget = ptrs + (total - ptrs) // 3  # pointers whole, a third of the lists: list pages are evicted
    disk = HeteroGraphStore.from_dataset(ds, in_memory=False, cache_bytes=budget, device="cpu")
    shares = [disk.relations[et].cache_bytes for et in ds.edge_types]
    assert shares == split_struct_cache(budget, files) and sum(p + r for p, r in shares) == budget
    assert len(set(r for _, r in shares)) > 1  # unequal relations, unequal shares
    mem = HeteroGraphStore.from_dataset(ds, in_memory=True, device="cpu")
    a, b = HeteroNeighborSampler(mem, [6, 3], seed=5), HeteroNeighborSampler(disk, [6, 3], seed=5)
    for seeds in torch.split(ds.train_idx[:256], 64):
        x, y = a.sample(seeds, "paper"), b.sample(seeds, "paper")
        assert all(torch.equal(x.node[nt], y.node[nt]) for nt in x.node)
        assert all(torch.equal(x.row[et], y.row[et]) and torch.equal(x.col[et], y.col[et]) and
                   torch.equal(x.edge[et], y.edge[et]) for et in x.row)
    assert sum(s["bytes_from_device"] for s in disk.stats().values()) > 0


def test_csc_file_splits_its_own_budget_the_same_way(ds):
    d = ds.relation_path(ds.edge_types[0])
    p, r = relation_file_bytes(d)
    f = CSCFile(d, cache_bytes=p + r // 2, device="cpu")
    assert f.cache_bytes == (p, r // 2)
    g = CSCFile(d, cache_bytes=(4096, 8192), device="cpu")  # an explicit split is kept
    assert g.cache_bytes == (4096, 8192)
    with pytest.raises(ValueError, match=">= 0"):
        CSCFile(d, cache_bytes=(-1, 5), device="cpu")
    f.close()
    g.close()


def test_a_file_its_share_covers_is_read_whole_at_open(ds, monkeypatch):
    from gpuio.graph import csc_file
    from gpuio.graph.csc_file import CSCMemory
    d = ds.relation_path(max(ds.edge_types, key=lambda et: relation_file_bytes(ds.relation_path(et))[1]))
    mem = CSCMemory.load(d, "cpu")
    p, r = relation_file_bytes(d)
    monkeypatch.setattr(csc_file, "WHOLE_CHUNK_BYTES", 1000)  # several chunks, the last one partial
    ptr_data, row_data = (mem.num_dst + 1) * 8, mem.num_edges * 8  # the files less their headers
    cases = {(p + r): (True, True), (ptr_data, row_data - 8): (True, False), (0, r): (False, True),
             (ptr_data - 8, 0): (False, False)}
    for budget, whole in cases.items():
        f = CSCFile(d, cache_bytes=budget, device="cpu")
        assert f.whole == whole
        data = ptr_data * whole[0] + row_data * whole[1]
        assert f.bytes_at_open == data and f.stats()["bytes_from_device"] == data  # counted once, at open
        dst = torch.randint(0, mem.num_dst, (500,))
        (s0, n0), (s1, n1) = mem.ptr(dst), f.ptr(dst)
        assert torch.equal(s0, s1) and torch.equal(n0, n1)
        pos = torch.randint(0, mem.num_edges, (500,))
        assert torch.equal(mem.rows(pos), f.rows(pos))
        assert all(torch.equal(a, b) for a, b in zip(mem.tensors(), f.tensors()))
        if all(whole):  # nothing more read after open, every lookup a hit
            assert f.stats() == dict(bytes_from_device=data, ptr_page_hit_rate=1.0, row_page_hit_rate=1.0)
        else:
            assert f.stats()["bytes_from_device"] > data
        f.close()
