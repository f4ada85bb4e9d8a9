"""Heterogeneous graphs end to end on the CPU: IGBH-shaped data on storage, per-relation CSC files, the
heterogeneous sampler and stores, RGAT training (gpuio vs in-memory features), Belady's MIN, and a 2-rank torchrun (gloo) run."""
import os
import subprocess
import sys
from functools import lru_cache

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")

import gpuio  # noqa: E402
from gpuio_apps.bench.belady import group_min_misses, min_misses, page_sequence, store_vs_min  # noqa: E402
from gpuio_apps.data import igbh  # noqa: E402
from gpuio.graph import CSCFile, CSCMemory, build_csc, csc_chunks, open_csc  # noqa: E402
from gpuio.pyg.hetero import HeteroGraphStore, HeteroNeighborSampler, hetero_feature_store  # noqa: E402
from gpuio.pyg.hetero_loader import HeteroBatchLoader  # noqa: E402
from repo_scripts import ROOT  # noqa: E402

CFG = dict(papers=600, features=16, seed=3)


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("igbh"))
    # a bucket far smaller than every relation: the external CSC build runs many passes
    return igbh.generate_igbh(root, igbh.IGBHConfig(**CFG), bucket_edges=777)


def _edges(directory):
    """All (dst, src) pairs of a CSC relation directory, as a sorted [E, 2] array."""
    parts = list(csc_chunks(directory, chunk_edges=1000)())
    pairs = np.stack([np.concatenate([d for d, _ in parts]), np.concatenate([s for _, s in parts])], 1)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def test_generator_shapes_labels_degrees(ds):
    n = igbh.IGBHConfig(**CFG).num_nodes()
    assert ds.num_nodes == n and set(ds.edge_types) == set(igbh.EDGE_TYPES)
    for nt in ds.node_types:
        feat = np.load(ds.feature_path(nt), mmap_mode="r")
        assert feat.shape == (n[nt], 16) and feat.dtype == np.float32
    # planted classes: label = id mod 19 except for the label-noise share
    agree = float((ds.y == torch.arange(n["paper"]) % 19).float().mean())
    assert 0.8 < agree < 0.97
    # heavy-tailed citation in-degrees; every paper has an author
    cites = np.diff(np.load(ds.relation_path(("paper", "cites", "paper")) + "/colptr.npy"))
    assert cites.max() > 8 * cites.mean()
    assert np.diff(np.load(ds.relation_path(("author", "rev_written_by", "paper")) + "/colptr.npy")).min() >= 1
    # homophily: most written_by edges join a paper and an author of the same planted class
    e = _edges(ds.relation_path(("paper", "written_by", "author")))
    assert np.mean(e[:, 0] % 19 == e[:, 1] % 19) > 0.6


def test_generator_chunks_reproduce_and_reverse_is_transpose(ds):
    cfg = igbh.IGBHConfig(**CFG)
    feat = np.load(ds.feature_path("author"), mmap_mode="r")
    lo, hi = 5, 40
    assert np.array_equal(np.array(feat[lo:hi]), igbh.feature_chunk(cfg, 1, 0, 40).numpy()[lo:hi])
    for s, r, d in igbh.RELATIONS:
        if r in igbh.REVERSE:
            fwd = _edges(ds.relation_path((s, r, d)))
            rev = _edges(ds.relation_path((d, igbh.REVERSE[r], s)))[:, ::-1]
            assert np.array_equal(fwd, rev[np.lexsort((rev[:, 1], rev[:, 0]))])


def test_float16_tables_are_the_float32_model_rounded(tmp_path):
    cfg = igbh.IGBHConfig(papers=60, features=8, seed=1, dtype="float16")
    ds = igbh.generate_igbh(str(tmp_path), cfg)
    feat = np.load(ds.feature_path("paper"))
    want = igbh.feature_chunk(cfg, 0, 0, 60).numpy().astype(np.float16)  # drawn in float32, rounded by NumPy
    assert feat.dtype == np.float16 and np.array_equal(feat.view(np.uint16), want.view(np.uint16))


def _tree(root):
    return {os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f), "rb").read()
            for d, _, fs in os.walk(root) for f in fs}


def test_generation_cut_short_is_replaced_and_foreign_files_are_refused(tmp_path):
    cfg = igbh.IGBHConfig(papers=300, features=8, seed=3)
    clean = _tree(igbh.generate_igbh(str(tmp_path / "clean"), cfg).root)

    def cut(what, done, total):  # a timeout or kill -9 in the middle of the relations
        if "written_by" in what:
            raise KeyboardInterrupt
    root = str(tmp_path / "d")
    with pytest.raises(KeyboardInterrupt):
        igbh.generate_igbh(root, cfg, progress=cut)
    assert os.path.exists(os.path.join(root, igbh.GENERATING)) and not os.path.exists(os.path.join(root, "meta.json"))
    assert _tree(igbh.generate_igbh(root, cfg).root) == clean  # replaced whole, same bytes, marker gone
    other = igbh.IGBHConfig(papers=200, features=8, seed=4)  # a complete generation with other parameters
    assert igbh.generate_igbh(root, other).num_nodes["paper"] == 200
    assert _tree(root) == _tree(igbh.generate_igbh(str(tmp_path / "other"), other).root)
    foreign = tmp_path / "foreign"
    (foreign / "paper").mkdir(parents=True)
    (foreign / "paper" / "node_feat.npy").write_bytes(b"not the generator's" * 100)
    with pytest.raises(FileExistsError, match="will not replace"):
        igbh.generate_igbh(str(foreign), cfg)
    assert (foreign / "paper" / "node_feat.npy").read_bytes() == b"not the generator's" * 100


def test_importer_reads_igbh_layout(tmp_path):
    src = tmp_path / "processed"
    rng = np.random.default_rng(0)
    counts = dict(paper=50, author=70, institute=5, fos=9)
    for nt, n in counts.items():
        (src / nt).mkdir(parents=True)
        np.save(src / nt / "node_feat.npy", rng.standard_normal((n, 8)).astype(np.float32))
    np.save(src / "paper" / "node_label_19.npy", rng.integers(0, 19, 50).astype(np.float32))
    rels = {("paper", "cites", "paper"): 200, ("paper", "written_by", "author"): 120,
            ("author", "affiliated_to", "institute"): 70, ("paper", "topic", "fos"): 90}
    lists = {}
    for (s, r, d), e in rels.items():
        (src / f"{s}__{r}__{d}").mkdir()
        lists[(s, r, d)] = np.stack([rng.integers(0, counts[s], e), rng.integers(0, counts[d], e)], 1)
        np.save(src / f"{s}__{r}__{d}" / "edge_index.npy", lists[(s, r, d)])
    ds = igbh.import_igbh(str(src), str(tmp_path / "out"), bucket_edges=33)
    assert ds.num_nodes == counts and len(ds.edge_types) == 7
    assert np.array_equal(np.load(ds.feature_path("fos")), np.load(src / "fos" / "node_feat.npy"))
    for (s, r, d), el in lists.items():
        want = el[:, ::-1][np.lexsort((el[:, 0], el[:, 1]))]  # (dst, src) sorted
        assert np.array_equal(_edges(ds.relation_path((s, r, d))), want)
    rev = _edges(ds.relation_path(("author", "rev_written_by", "paper")))
    el = lists[("paper", "written_by", "author")]
    assert np.array_equal(rev, el[np.lexsort((el[:, 1], el[:, 0]))])
    with pytest.raises(FileNotFoundError, match="node_feat"):
        igbh.import_igbh(str(tmp_path), str(tmp_path / "x"))


def test_build_csc_rejects_bad_ids(tmp_path):
    chunks = lambda: iter([(np.array([0, 5]), np.array([1, 1]))])  # noqa: E731
    with pytest.raises(IndexError, match=r"destination ids must lie in \[0, 3\)"):
        build_csc(chunks, 3, str(tmp_path / "r"))
    with pytest.raises(ValueError, match="bucket_edges"):
        build_csc(chunks, 9, str(tmp_path / "r"), bucket_edges=0)


def test_file_and_memory_structure_sample_the_same(ds):
    mem = HeteroGraphStore.from_dataset(ds, in_memory=True, device="cpu")
    disk = HeteroGraphStore.from_dataset(ds, in_memory=False, cache_bytes=16 << 10, device="cpu")
    assert isinstance(disk.relations[("paper", "cites", "paper")], CSCFile)
    assert isinstance(mem.relations[("paper", "cites", "paper")], CSCMemory)
    a, b = HeteroNeighborSampler(mem, [6, 3], seed=11), HeteroNeighborSampler(disk, [6, 3], seed=11)
    for seeds in torch.split(ds.train_idx[:192], 64):
        x, y = a.sample(seeds, "paper"), b.sample(seeds, "paper")
        for nt in x.node:
            assert torch.equal(x.node[nt], y.node[nt])
        for et in x.row:
            assert torch.equal(x.row[et], y.row[et]) and torch.equal(x.col[et], y.col[et])
            assert torch.equal(x.edge[et], y.edge[et])
    assert sum(s["bytes_from_device"] for s in disk.stats().values()) > 0  # read through the engine
    with pytest.raises(FileNotFoundError, match="not a CSC relation directory"):
        open_csc(ds.root)


def test_sampler_contract(ds):
    graph = HeteroGraphStore.from_dataset(ds, in_memory=True, device="cpu")
    seeds = ds.train_idx[:40]
    out = HeteroNeighborSampler(graph, [4, 2], seed=1).sample(seeds, "paper")
    assert torch.equal(out.node["paper"][:40], seeds)
    for nt, ids in out.node.items():
        assert ids.unique().numel() == ids.numel() and sum(out.num_sampled_nodes[nt]) == ids.numel()
    for et, row in out.row.items():
        s, _, d = et
        colptr, src = graph.relations[et].tensors()
        gs, gd = out.node[s][row], out.node[d][out.col[et]]
        assert torch.equal(src[out.edge[et]], gs)  # e_id is the CSC position of the edge
        assert bool(((out.edge[et] >= colptr[gd]) & (out.edge[et] < colptr[gd + 1])).all())
        per_dst = torch.bincount(out.col[et], minlength=out.node[d].numel())
        assert (int(per_dst.max()) if per_dst.numel() else 0) <= 4 and sum(out.num_sampled_edges[et]) == row.numel()
    with pytest.raises(IndexError, match="seed node ids"):
        HeteroNeighborSampler(graph, [2], seed=0).sample(torch.tensor([10 ** 6]), "paper")
    with pytest.raises(ValueError, match="num_neighbors"):
        HeteroNeighborSampler(graph, [0, 2])


def test_node_loader_over_gpuio_stores(ds):
    from torch_geometric.loader import NodeLoader
    graph = HeteroGraphStore.from_dataset(ds, in_memory=False, device="cpu")
    tables = {nt: gpuio.TableCache(gpuio.TensorFile.open(ds.feature_path(nt)), gpu_cache_bytes=64 << 10,
                                     device="cpu") for nt in ds.node_types}
    fs = hetero_feature_store(tables, y={"paper": ds.y})
    loader = NodeLoader((fs, graph), HeteroNeighborSampler(graph, [5, 3], seed=2),
                        input_nodes=("paper", ds.train_idx), batch_size=32)
    batch = next(iter(loader))
    for nt in ds.node_types:
        want = np.load(ds.feature_path(nt))[batch[nt].n_id.numpy()]
        assert torch.equal(batch[nt].x, torch.from_numpy(want))
    assert batch["paper"].batch_size == 32 and torch.equal(batch["paper"].y[:32], ds.y[batch["paper"].n_id[:32]])
    assert batch["author", "rev_written_by", "paper"].edge_index.shape[0] == 2


def test_loader_rank_sharding_and_trace(ds):
    graph = HeteroGraphStore.from_dataset(ds, in_memory=True, device="cpu")
    feats = {nt: gpuio.cache.InMemoryRows(torch.from_numpy(np.load(ds.feature_path(nt)))) for nt in ds.node_types}
    seen = []
    for rank in range(2):
        ld = HeteroBatchLoader(HeteroNeighborSampler(graph, [3], seed=0), feats, ds.train_idx, batch_size=50,
                               rank=rank, world_size=2, background=False)
        seen.append([b.n_id["paper"][: b.batch_size] for b in ld])
        assert len(seen[-1]) == len(ld) == -(-ds.train_idx.numel() // 50) // 2
    a, b = torch.cat(seen[0]), torch.cat(seen[1])
    assert len(np.intersect1d(a.numpy(), b.numpy())) == 0  # ranks read disjoint mini-batches
    trace = {}
    ld = HeteroBatchLoader(HeteroNeighborSampler(graph, [3], seed=0), feats, ds.train_idx, batch_size=50,
                           max_batches=3, trace=trace)
    batches = list(ld)
    assert len(batches) == 3 and all(torch.equal(t, b.n_id["author"]) for t, b in zip(trace["author"], batches))
    per_epoch = -(-ds.train_idx.numel() // 50)
    ld = HeteroBatchLoader(HeteroNeighborSampler(graph, [2], seed=0), feats, ds.train_idx, batch_size=50,
                           max_batches=per_epoch + 2, background=False)
    seeds = [b.n_id["paper"][: b.batch_size] for b in ld]
    assert len(seeds) == len(ld) == per_epoch + 2  # a second, reshuffled epoch supplies the extra steps
    assert torch.equal(torch.cat(seeds[:per_epoch]).sort().values, ds.train_idx)
    assert not torch.equal(seeds[per_epoch], seeds[0])


@lru_cache(None)
def _brute_min(seq, cap):
    """Exhaustive optimum over every keep/evict/bypass choice (tiny inputs only)."""
    @lru_cache(None)
    def f(i, cache):
        if i == len(seq):
            return 0
        p = seq[i]
        if p in cache:
            return f(i + 1, cache)
        best = 1 + f(i + 1, cache)
        if len(cache) < cap:
            best = min(best, 1 + f(i + 1, tuple(sorted(cache + (p,)))))
        else:
            for q in cache:
                best = min(best, 1 + f(i + 1, tuple(sorted(tuple(x for x in cache if x != q) + (p,)))))
        return best
    return f(0, ())


@lru_cache(None)
def _brute_group_min(groups, cap):
    """Exhaustive optimum of the group model: every subset of (cache + group) of size <= cap kept."""
    import itertools

    @lru_cache(None)
    def f(i, cache):
        if i == len(groups):
            return 0
        cand = sorted(set(cache) | set(groups[i]))
        return len(set(groups[i]) - set(cache)) + min(
            f(i + 1, sub) for k in range(min(cap, len(cand)) + 1) for sub in itertools.combinations(cand, k))
    return f(0, ())


def test_belady_min_is_the_optimum():
    rng = np.random.default_rng(5)
    for _ in range(120):
        seq = tuple(int(v) for v in rng.integers(0, 6, rng.integers(0, 12)))
        cap = int(rng.integers(0, 4))
        assert min_misses(np.array(seq, dtype=np.int64), cap) == _brute_min(seq, cap)
    assert page_sequence([torch.tensor([9, 1, 1, 8]), torch.tensor([3])], page_rows=4).tolist() == [0, 2, 0]
    for _ in range(120):  # the group model: a group's pages are read together, then any `cap` are kept
        groups = tuple(tuple(sorted(set(int(v) for v in rng.integers(0, 7, rng.integers(1, 4)))))
                       for _ in range(rng.integers(1, 6)))
        cap = int(rng.integers(0, 4))
        best = _brute_group_min(groups, cap)
        trace = [torch.tensor(g) for g in groups]
        assert group_min_misses(trace, cap) == best <= min_misses(page_sequence(trace), cap)
        assert group_min_misses(trace, cap, lookahead=0) >= best
    with pytest.raises(ValueError, match="capacity"):
        min_misses(np.zeros(3, np.int64), -1)


def test_rgat_gpuio_matches_memory_and_learns(ds, one_thread):
    from gpuio_apps.gnn.hetero_job import HeteroConfig, run
    cfg = HeteroConfig(root=ds.root, papers=CFG["papers"], features=CFG["features"], seed=CFG["seed"],
                       backends=("gpuio", "memory"), steps=8, batch_size=32, hidden=32, eval_nodes=120, lr=0.02,
                       gpu_cache_fraction=0.05, host_fraction=0.1, belady=True, device="cpu",
                       struct_cache_mb=0)  # no structure cache: every step reads the structure through the engine
    out = {r["backend"]: r for r in run(cfg, log=lambda *a: None)}
    g, m = out["gpuio"], out["memory"]
    assert g["steps"] == 8 and g["losses"] == m["losses"]  # same bytes, same batches -> same losses
    assert g["test_acc"] == m["test_acc"] > 3 / 19  # learns beyond chance (1/19)
    assert g["structure_bytes"] > 0 and g["device_rate"] > 0
    assert g["belady"]["ratio"] >= 1.0 and g["belady"]["ratio_whole"] >= 1.0  # nothing beats the optimum
    cfg.backends, cfg.structure, cfg.belady = ("gpuio",), "memory", False
    (mem_struct,) = run(cfg, log=lambda *a: None)
    assert mem_struct["losses"] == g["losses"] and mem_struct["structure_bytes"] == 0  # same samples


def test_rgat_computes_only_what_the_target_uses_and_every_parameter_gets_a_gradient(ds, one_thread):
    """DistributedDataParallel runs with find_unused_parameters=False (gpuio_apps.gnn.hetero_job): that holds only
    if every parameter gets a gradient on every batch, small batches with empty relations included."""
    import torch.nn.functional as F
    from gpuio_apps.gnn.rgat import make_rgat, needed_types
    assert needed_types(ds.edge_types, "paper", 1) == [{"paper"}]
    two = needed_types(ds.edge_types, "paper", 2)
    assert two[1] == {"paper"} and two[0] == {"paper"} | {et[0] for et in ds.edge_types if et[2] == "paper"}
    assert two[0] != set(ds.node_types)  # this graph has a type the logits do not read after one layer
    graph = HeteroGraphStore.from_dataset(ds, in_memory=True, device="cpu")
    tables = {nt: torch.from_numpy(np.load(ds.feature_path(nt))) for nt in ds.node_types}
    model = make_rgat(ds.edge_types, {nt: CFG["features"] for nt in ds.node_types}, ds.num_classes, hidden=16)
    assert {et[2] for et in model.convs[-1].convs.keys()} == {"paper"} and set(model.skips[-1]) == {"paper"}
    sampler = HeteroNeighborSampler(graph, [2, 1], seed=5)
    empty_seen = 0
    for seeds in torch.split(ds.train_idx[:40], 4):
        out = sampler.sample(seeds, "paper")
        empty_seen += sum(r.numel() == 0 for r in out.row.values())
        x = {nt: tables[nt][out.node[nt]] for nt in ds.node_types}
        ei = {et: torch.stack([out.row[et], out.col[et]]) for et in out.row}
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x, ei)[: seeds.numel()], ds.y[seeds]).backward()
        assert [n for n, p in model.named_parameters() if p.grad is None] == []
    assert empty_seen > 0  # the batches above did include relations with no edges


def test_store_vs_min_counts_host_fill(ds):
    tf = gpuio.TensorFile.open(ds.feature_path("fos"))
    fs = gpuio.TableCache(tf, gpu_cache_bytes=4096, host_cache_rows=5, hot_scores=torch.arange(tf.num_rows),
                            device="cpu", accumulate=False)
    trace = [torch.tensor([0, 1, 2]), torch.tensor([0, 1, 2]), torch.tensor([tf.num_rows - 1])]
    for t in trace:
        fs.gather(t)
    r = store_vs_min(fs, trace)
    assert r["capacity_pages"] == fs.cache.num_slots + 5
    assert r["gpuio_bytes"] == tf.stats()["bytes_read"] >= r["min_bytes"] > 0


def test_two_rank_gloo_training_ends_with_identical_parameters(ds, tmp_path):
    """torchrun, 2 ranks, gloo: each rank reads its own mini-batches through gpuio; DDP keeps the ranks'
    parameters equal (they would differ without the gradient all-reduce: the batches differ), and the
    shared model learns (rank 0's loss falls, test accuracy far above chance)."""
    import json
    params, report = str(tmp_path / "params"), tmp_path / "r.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(sys.path))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(ROOT / "examples" / "rgat_igbh.py"),
           "--root", ds.root, "--papers", str(CFG["papers"]), "--features", str(CFG["features"]),
           "--seed", str(CFG["seed"]), "--batch-size", "32", "--steps", "10", "--eval-nodes", "64",
           "--backends", "gpuio", "--device", "cpu", "--save-params", params, "--json", str(report),
           "--struct-cache-mb", "0",  # no structure cache: each rank's steps read the structure from storage
           "--time-cap", "0"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    a, b = torch.load(params + ".rank0"), torch.load(params + ".rank1")
    from gpuio_apps.gnn.rgat import make_rgat
    init = make_rgat(ds.edge_types, {nt: CFG["features"] for nt in ds.node_types}, ds.num_classes,
                     seed=CFG["seed"]).state_dict()
    assert a.keys() == b.keys() == init.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)  # DDP kept the ranks in step
    assert sum(not torch.equal(a[k], init[k]) for k in a) > len(a) // 2  # and they trained
    (r,) = json.loads(report.read_text())["results"]
    assert r["world_size"] == 2 and r["steps"] == 10
    assert [q["rank"] for q in r["ranks"]] == [0, 1] and all(q["steps"] == 10 for q in r["ranks"])
    assert all(q["feature_bytes"] > 0 and q["structure_bytes"] > 0 for q in r["ranks"])  # each rank read storage
    losses = r["losses"]
    assert len(losses) == 10 and np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3]), losses  # loss falls
    assert r["test_acc"] > 3 / 19 and r["device_rate"] > 0  # learns; features came through gpuio from storage


def test_loader_lookahead_protects_coming_batches_and_keeps_results(ds):
    graph = HeteroGraphStore.from_dataset(ds, in_memory=True, device="cpu")

    def stores(window):
        return {nt: gpuio.TableCache(gpuio.TensorFile.open(ds.feature_path(nt)), gpu_cache_bytes=8 << 10,
                                       window=window, device="cpu") for nt in ds.node_types}
    runs = []
    for lookahead in (0, 3):
        feats = stores(8)
        ld = HeteroBatchLoader(HeteroNeighborSampler(graph, [4, 2], seed=7), feats, ds.train_idx, batch_size=40,
                               max_batches=12, depth=1, background=False, lookahead=lookahead)
        pending, batches = [], []
        for b in ld:  # batches announced but not yet served when each one is handed out
            pending.append(len(feats["paper"].window.pending))
            batches.append(b)
        runs.append((pending, batches))
    assert max(runs[0][0]) <= 1 and max(runs[1][0]) >= 3  # the look-ahead, once ramped up, is announced ahead
    assert runs[1][0][0] < 3  # the first batch is not held back until 3 more are sampled
    for a, b in zip(runs[0][1], runs[1][1]):
        assert all(torch.equal(a.x[nt], b.x[nt]) for nt in a.x)
    with pytest.raises(ValueError, match="lookahead 4 with depth 4 needs"):
        HeteroBatchLoader(HeteroNeighborSampler(graph, [2], seed=0), stores(8), ds.train_idx, lookahead=4)


@pytest.mark.parametrize("background", [False, True])
def test_loader_announces_and_submits_in_the_ramped_order(ds, background):
    """Every store sees batch i announced when sampled and submitted as gpuio.loader.ramped_lookahead says
    (the same order as NodeBatchLoader's), again from the start in each iteration."""
    from loader_util import expected_order

    graph = HeteroGraphStore.from_dataset(ds, in_memory=True, device="cpu")
    feats = {nt: gpuio.TableCache(gpuio.TensorFile.open(ds.feature_path(nt)), gpu_cache_bytes=8 << 10,
                                    window=8, device="cpu") for nt in ds.node_types}
    log = {nt: [] for nt in feats}
    for nt, store in feats.items():
        def logged(kind, call, nt=nt):
            def f(idx, *a, **kw):
                log[nt].append((kind, torch.as_tensor(idx).clone()))
                return call(idx, *a, **kw)
            return f
        store.announce, store.submit = logged("a", store.announce), logged("s", store.submit)
    ld = HeteroBatchLoader(HeteroNeighborSampler(graph, [4, 2], seed=7), feats, ds.train_idx, batch_size=40,
                           max_batches=11, depth=2, background=background, lookahead=4)
    def submitted():
        return sum(k == "s" for k, _ in log["paper"])
    batches, beyond = [], []  # per batch handed out: batches submitted beyond it
    for _ in range(2):
        start = submitted()
        for i, b in enumerate(ld):
            batches.append(b)
            beyond.append(submitted() - start - (i + 1))
    if not background:  # to the last batch, at most depth (2) beyond the one handed out: the tail does not burst
        assert max(beyond) == 2 and beyond[-1] == 0, beyond
    for nt, calls in log.items():
        assert "".join(k for k, _ in calls) == expected_order(11, 4) * 2, nt
        announced = [r for k, r in calls if k == "a"]
        submitted = [r for k, r in calls if k == "s"]
        assert len(announced) == len(submitted) == len(batches) == 22
        assert all(torch.equal(a, b.n_id[nt]) and torch.equal(s, b.n_id[nt])  # in batch order
                   for a, s, b in zip(announced, submitted, batches))
