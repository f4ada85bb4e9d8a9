"""The vectorised heterogeneous sampler (gpuio.pyg.hetero_ops) against the per-relation algorithm it
replaced, the dense relabel map, and the loader's sampling threads (same batches for any thread count)."""
import threading

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")

import gpuio  # noqa: E402
from gpuio_apps.data import igbh  # noqa: E402
from gpuio.pyg.hetero import HeteroGraphStore, HeteroNeighborSampler  # noqa: E402
from gpuio.pyg.hetero_loader import HeteroBatchLoader, batch_generator  # noqa: E402
from gpuio.pyg.hetero_ops import DenseRelabel, sample_positions_many  # noqa: E402
from gpuio.pyg.sampler import _Relabel, sample_positions  # noqa: E402
from repo_scripts import load_script  # noqa: E402


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return igbh.generate_igbh(str(tmp_path_factory.mktemp("igbh")), igbh.IGBHConfig(papers=900, features=8, seed=5))


def reference_sample(s: HeteroNeighborSampler, seeds: torch.Tensor, input_type: str):
    """The per-relation algorithm (one sample_positions and one relabel per relation, relations in sorted
    order) the vectorised sampler must reproduce exactly: (nodes, rows, cols, edges, counts)."""
    types = sorted(s.graph.num_nodes)
    empty = torch.empty(0, dtype=torch.long)
    relabel = {nt: _Relabel(seeds if nt == input_type else empty) for nt in types}
    frontier = {input_type: (seeds, torch.arange(seeds.numel()))}
    out = {et: ([], [], []) for et in s.edge_types}
    n_nodes = {nt: [seeds.numel() if nt == input_type else 0] for nt in types}
    for hop in range(s.num_hops):
        added = {nt: [] for nt in types}
        for et in s.edge_types:
            if et[2] not in frontier:
                continue
            glob, loc = frontier[et[2]]
            csc = s.graph.relations[et]
            start, deg = csc.ptr(glob)
            pos, owner = sample_positions(start, deg, s.num_neighbors[et][hop], s.replace, s.generator)
            local, new = relabel[et[0]].lookup_or_add(csc.rows(pos))
            for acc, v in zip(out[et], (local, loc[owner], pos)):
                acc.append(v)
            added[et[0]].append(new)
        frontier = {}
        for nt in types:
            new = torch.cat(added[nt]) if added[nt] else empty
            n_nodes[nt].append(new.numel())
            if new.numel():
                frontier[nt] = (new, relabel[nt].count - new.numel() + torch.arange(new.numel()))
    cat = (lambda xs: torch.cat(xs) if xs else empty)
    return ({nt: torch.cat(relabel[nt].nodes) for nt in types},
            {et: tuple(cat(x) for x in v) for et, v in out.items()}, n_nodes)


def _same(out, ref) -> bool:
    nodes, edges, n_nodes = ref
    return (all(torch.equal(out.node[nt], nodes[nt]) for nt in nodes) and out.num_sampled_nodes == n_nodes
            and all(torch.equal(out.row[et], r) and torch.equal(out.col[et], c) and torch.equal(out.edge[et], e)
                    for et, (r, c, e) in edges.items()))


@pytest.mark.parametrize("fan,replace,dense", [([4, 2], False, None), ([4, 2], False, 0), ([3, -1], False, None),
                                               ([2, 3], True, None), ("mixed", False, None)])
def test_vectorised_sampler_equals_the_per_relation_algorithm(ds, fan, replace, dense):
    graph = HeteroGraphStore.from_dataset(ds, in_memory=True, device="cpu")
    if fan == "mixed":  # per-relation fan-outs: several k in one hop
        fan = {et: [1 + i % 4, -1 if i == 2 else 1 + i % 3] for i, et in enumerate(sorted(graph.relations))}
    kw = {} if dense is None else dict(dense_relabel_max_nodes=dense)
    new, old = HeteroNeighborSampler(graph, fan, replace, seed=9, **kw), HeteroNeighborSampler(graph, fan, replace, seed=9)
    repeated = torch.cat([ds.train_idx[:30], ds.train_idx[10:20]])  # a seed given twice keeps its first id
    for seeds in (ds.train_idx[:70], ds.train_idx[70:71], ds.train_idx[:0], ds.train_idx[100:300], repeated):
        assert _same(new.sample(seeds, "paper"), reference_sample(old, seeds, "paper"))  # generator state carries on
    if dense == 0:
        assert new._free_tables == [{}]  # no node type took the dense map
    else:
        assert all(bool((t == -1).all()) for t in new._free_tables[0].values())  # maps reset after each batch


def test_sample_positions_many_is_the_relations_one_after_another():
    g = torch.Generator().manual_seed(1)
    degs = [torch.randint(0, 9, (n,), generator=g) for n in (50, 0, 31, 7)]
    starts = [torch.randint(0, 1000, (d.numel(),), generator=g) for d in degs]
    for ks, replace in (([3, 3, 5, -1], False), ([2, 4, 4, 1], True), ([8, 1, 1, 1], False)):
        a, b = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
        many = sample_positions_many(starts, degs, ks, replace, a)
        for (pos, owner), st, d, k in zip(many, starts, degs, ks):
            p2, o2 = sample_positions(st, d, k, replace, b)
            assert torch.equal(pos, p2) and torch.equal(owner, o2)
        assert torch.equal(torch.rand(3, generator=a), torch.rand(3, generator=b))  # same numbers consumed


def test_dense_relabel_numbers_like_the_sorted_one():
    g = torch.Generator().manual_seed(2)
    table = torch.full((500,), -1, dtype=torch.long)
    seeds = torch.randperm(500, generator=g)[:20]
    d, s = DenseRelabel(table, seeds), _Relabel(seeds)
    for n in (0, 40, 300, 1):
        ids = torch.randint(0, 500, (n,), generator=g)
        (l1, a1), (l2, a2) = d.lookup_or_add(ids), s.lookup_or_add(ids)
        assert torch.equal(l1, l2) and torch.equal(a1, a2) and d.count == s.count
    assert torch.equal(torch.cat(d.nodes)[torch.cat(d.nodes).argsort()], torch.cat(s.nodes).sort().values)
    d.release()
    assert bool((table == -1).all())


def test_concurrent_calls_with_own_generators_match_sequential(ds):
    for in_memory in (True, False):
        graph = HeteroGraphStore.from_dataset(ds, in_memory=in_memory, cache_bytes=8 << 10, device="cpu")
        s = HeteroNeighborSampler(graph, [4, 3], seed=3)
        batches = list(torch.split(ds.train_idx[:240], 40))
        want = [s.sample(b, "paper", generator=batch_generator(3, i, "cpu")) for i, b in enumerate(batches)]
        got = [None] * len(batches)

        def work(i):
            got[i] = s.sample(batches[i], "paper", generator=batch_generator(3, i, "cpu"))
        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(batches))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for a, b in zip(want, got):
            assert all(torch.equal(a.node[nt], b.node[nt]) for nt in a.node)
            assert all(torch.equal(a.row[et], b.row[et]) and torch.equal(a.edge[et], b.edge[et]) for et in a.row)


def test_loader_batches_do_not_depend_on_sample_threads(ds):
    feats = {nt: gpuio.cache.InMemoryRows(torch.from_numpy(np.load(ds.feature_path(nt)))) for nt in ds.node_types}
    for structure in ("memory", "file"):
        graph = HeteroGraphStore.from_dataset(ds, in_memory=structure == "memory", device="cpu")
        runs = []
        for threads, bg in ((1, False), (3, True), (2, False)):
            ld = HeteroBatchLoader(HeteroNeighborSampler(graph, [3, 2], seed=4), feats, ds.train_idx, batch_size=60,
                                   max_batches=7, depth=2, lookahead=1, background=bg, sample_threads=threads)
            runs.append([list(ld), list(ld)])  # two iterations: the second samples batches 7..13
        base = runs[0]
        assert not torch.equal(base[0][0].n_id["author"], base[1][0].n_id["author"]) or \
            not torch.equal(base[0][0].n_id["paper"], base[1][0].n_id["paper"])
        for other in runs[1:]:
            for it_a, it_b in zip(base, other):
                assert len(it_a) == len(it_b) == 7
                for a, b in zip(it_a, it_b):
                    assert all(torch.equal(a.n_id[nt], b.n_id[nt]) and torch.equal(a.x[nt], b.x[nt]) for nt in a.n_id)
                    assert all(torch.equal(a.edge_index[et], b.edge_index[et]) for et in a.edge_index)
    with pytest.raises(ValueError, match="sample_threads must be an int >= 1"):
        HeteroBatchLoader(HeteroNeighborSampler(graph, [2], seed=0), feats, ds.train_idx, sample_threads=0)


def test_loader_closed_early_stops_its_sampling_threads(ds):
    graph = HeteroGraphStore.from_dataset(ds, in_memory=True, device="cpu")
    feats = {nt: gpuio.cache.InMemoryRows(torch.zeros(n, 1)) for nt, n in ds.num_nodes.items()}
    before = {t.name for t in threading.enumerate()}
    it = iter(HeteroBatchLoader(HeteroNeighborSampler(graph, [3, 2], seed=1), feats, ds.train_idx, batch_size=20,
                                max_batches=20, sample_threads=3))
    next(it)
    it.close()
    for t in threading.enumerate():
        if t.name.startswith("gpuio-sample") and t.name not in before:
            t.join(5)
            assert not t.is_alive()


def test_hetero_sampler_benchmark_tiny(tmp_path):
    r = load_script("benchmarks/hetero_sampler.py").main(["--tiny", "--data-dir", str(tmp_path / "d")])
    assert r["memory_ms_per_batch"] > 0 and r["file_ms_per_batch"] > 0 and r["loader_ratio"] > 0
