"""BFS / CC / SSSP on out-of-core CSR graphs (gpuio_apps.papers.graph_analytics): every edge source gives SciPy's answer
on a small Kronecker graph, the Graph500 BFS validation accepts valid trees and rejects broken ones, the CSR builder
equals SciPy's from an edge-list file, frontier chunking, and the benchmark and example smoke runs."""
import numpy as np
import pytest
import torch

from gpuio_apps.papers.graph_analytics import (CSRGraph, SOURCES, bfs, choose_root, connected_components, expand,
                                               generate_kronecker, kronecker_edges, load_edges, make_source,
                                               scipy_reference, sssp, sssp_window, validate_bfs, validate_sssp,
                                               vertex_ranges)
from repo_scripts import load_script


def _cuda_ok() -> bool:
    try:
        from gpuio import _core
        return bool(_core.cuda_built) and torch.cuda.is_available()
    except ImportError:
        return False


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    return generate_kronecker(tmp_path_factory.mktemp("g") / "k9", scale=9, edgefactor=8, seed=7)


def _check_all(g, device, source_name, **kw):
    root = choose_root(g, 3)
    ref = scipy_reference(g, root)
    rp = torch.from_numpy(g.row_ptr).to(device)
    src = make_source(source_name, g, device, weights=True, **kw)
    try:
        level, parent, st = bfs(rp, src, root, max_edges=1500)
        assert st["rounds"] >= 2
        np.testing.assert_array_equal(level.cpu().numpy(), ref["level"])
        assert validate_bfs(g, root, level, parent, chunk=2000) == []
        labels, _ = connected_components(rp, src, max_edges=1500)
        np.testing.assert_array_equal(labels.cpu().numpy(), ref["labels"])
        dist, _ = sssp(rp, src, root, max_edges=1500)
        d = dist.double().cpu().numpy()
        np.testing.assert_array_equal(np.isinf(d), np.isinf(ref["dist"]))
        np.testing.assert_allclose(d[~np.isinf(d)], ref["dist"][~np.isinf(d)], rtol=1e-5)
        return src.stats()
    finally:
        src.close()


@pytest.mark.parametrize("source_name", list(SOURCES))
def test_every_source_matches_scipy_on_the_cpu(graph, source_name):
    stats = _check_all(graph, "cpu", source_name, cache_bytes=16 << 10)  # 4 pages: far below the edge files
    if source_name == "gpuio-array":
        assert 0 < stats["hit_rate"] < 1 and stats["col_page_reads"] > 0


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="needs a CUDA build and GPU")
@pytest.mark.parametrize("source_name", ["gpuio-array", "pread+copy", "memmap+copy"])
@pytest.mark.parametrize("page_bytes", [4096, 16384])
def test_gpu_sources_match_scipy(graph, source_name, page_bytes):
    stats = _check_all(graph, "cuda", source_name, cache_bytes=8 * page_bytes, page_bytes=page_bytes)
    if source_name == "gpuio-array":
        assert 0 < stats["hit_rate"] < 1


def test_graph500_validation_rejects_broken_trees(graph):
    root = choose_root(graph, 3)
    src = make_source("in-memory", graph, "cpu", weights=False)
    level, parent, _ = bfs(torch.from_numpy(graph.row_ptr), src, root)
    assert validate_bfs(graph, root, level, parent) == []
    v = int(torch.nonzero(level == 2)[0])
    bad = parent.clone()
    bad[v] = root  # no edge root-v at level 2... and the parent is two levels up
    assert any("tree edge" in e for e in validate_bfs(graph, root, level, bad))
    lv = level.clone()
    lv[v] = 5
    assert any("more than one apart" in e or "tree edge" in e for e in validate_bfs(graph, root, lv, parent))
    cut = level.clone()
    cut[v] = -1
    assert validate_bfs(graph, root, cut, parent)  # reached/unreached mismatch


@pytest.mark.parametrize("window", [0, 1, 3])
def test_sssp_sweeps_match_scipy_at_every_window(graph, window):
    root = choose_root(graph, 3)
    ref = scipy_reference(graph, root)["dist"]
    rp = torch.from_numpy(graph.row_ptr)
    src = make_source("gpuio-array", graph, "cpu", cache_bytes=64 << 10)
    try:
        dist, st = sssp(rp, src, root, max_edges=700, window=window)  # many ranges
    finally:
        src.close()
    d = dist.double().numpy()
    np.testing.assert_array_equal(np.isinf(d), np.isinf(ref))
    np.testing.assert_allclose(d[~np.isinf(d)], ref[~np.isinf(d)], rtol=1e-5)
    assert st["window"] == window and st["rounds"] >= 2 and st["relax_steps"] >= st["rounds"]
    assert validate_sssp(graph, root, dist, chunk=900) == []


def test_sssp_window_follows_the_cache_and_ranges_cover_all(graph):
    rp = torch.from_numpy(graph.row_ptr)
    ranges = vertex_ranges(rp, 700)
    assert ranges[0][0] == 0 and ranges[-1][1] == graph.num_nodes
    assert all(a < b and b == c for (a, b), (c, _) in zip(ranges, ranges[1:] + [(ranges[-1][1], 0)]))
    assert len(ranges) >= graph.num_edges // 700 // 2
    assert sssp_window(make_source("in-memory", graph, "cpu"), 700) == 0  # no cache: no repeats
    src = make_source("gpuio-array", graph, "cpu", cache_bytes=2 * 4 * 700 * 10)
    try:
        assert sssp_window(src, 700) == int(0.8 * src.cache_bytes_per_array // (700 * 4)) >= 1
        _, st = sssp(rp, src, choose_root(graph, 3), max_edges=700)
        assert st["window"] == sssp_window(src, 700)
    finally:
        src.close()


def test_sssp_validation_rejects_wrong_distances(graph):
    root = choose_root(graph, 3)
    src = make_source("in-memory", graph, "cpu")
    dist, _ = sssp(torch.from_numpy(graph.row_ptr), src, root)
    assert validate_sssp(graph, root, dist) == []
    v = int(torch.nonzero(torch.isfinite(dist) & (dist > 0.5))[0])
    up = dist.clone()
    up[v] += 0.25  # too long: a neighbour's edge still shortens it, and it has no tight in-edge
    assert any("still relaxes" in e for e in validate_sssp(graph, root, up))
    down = dist.clone()
    down[v] -= 0.25  # too short: no in-edge explains it
    assert any("no tight in-edge" in e for e in validate_sssp(graph, root, down))
    cut = dist.clone()
    cut[v] = float("inf")  # reached neighbours, unreached vertex
    assert validate_sssp(graph, root, cut)
    moved = dist.clone()
    moved[root] = 0.125
    assert any("root" in e for e in validate_sssp(graph, root, moved))


def test_csr_from_edge_file_matches_scipy(tmp_path):
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    e = rng.integers(0, 300, size=(2, 2000))
    txt = tmp_path / "edges.txt"
    np.savetxt(txt, e.T, fmt="%d", header="u v")
    g = load_edges(tmp_path / "csr", txt, num_nodes=310)
    assert g.num_nodes == 310
    keep = e[0] != e[1]
    a = sp.coo_matrix((np.ones(keep.sum() * 2), (np.r_[e[0][keep], e[1][keep]], np.r_[e[1][keep], e[0][keep]])),
                      shape=(310, 310)).tocsr()
    a.sum_duplicates()
    a.sort_indices()
    np.testing.assert_array_equal(g.row_ptr, a.indptr)
    np.testing.assert_array_equal(np.load(g.col_path)[:g.num_edges], a.indices)
    w = np.load(g.weight_path)[:g.num_edges]
    m = g.to_scipy()
    assert (w > 0).all() and (w <= 1).all() and abs(m - m.T).max() == 0  # symmetric weights
    npy = tmp_path / "edges.npy"
    np.save(npy, e)
    g2 = load_edges(tmp_path / "csr2", npy, num_nodes=310)
    np.testing.assert_array_equal(g2.row_ptr, g.row_ptr)
    with pytest.raises(ValueError, match="shape"):
        np.save(tmp_path / "bad.npy", np.zeros((3, 4), np.int64))
        load_edges(tmp_path / "csr3", tmp_path / "bad.npy")
    with pytest.raises(FileNotFoundError, match="graph.json"):
        CSRGraph(tmp_path)


def test_kronecker_generator_is_seeded_and_skewed():
    s1, d1 = kronecker_edges(8, 4, seed=5)
    s2, d2 = kronecker_edges(8, 4, seed=5)
    assert torch.equal(s1, s2) and torch.equal(d1, d2) and s1.numel() == 4 * 256
    assert int(s1.max()) < 256 and int(s1.min()) >= 0
    deg = torch.bincount(torch.cat([s1, d1]).long(), minlength=256)
    assert int(deg.max()) > 4 * float(deg.float().mean())  # Kronecker degrees are heavy-tailed
    with pytest.raises(ValueError, match="scale=0"):
        kronecker_edges(0, 4, seed=1)


def test_expand_chunks_cover_every_edge_once():
    rp = torch.tensor([0, 3, 3, 10, 11, 20])
    frontier = torch.tensor([0, 2, 4])
    parts = list(expand(rp, frontier, max_edges=4))
    src = torch.cat([p[0] for p in parts])
    idx = torch.cat([p[1] for p in parts])
    assert idx.tolist() == [0, 1, 2, *range(3, 10), *range(11, 20)]
    assert src.tolist() == [0] * 3 + [2] * 7 + [4] * 9
    assert list(expand(rp, torch.tensor([1]), 4)) == []


def test_graph_bench_and_example_tiny(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    r = load_script("benchmarks/graph_bench.py").main(["--tiny", "--device", "cpu", "--json", str(tmp_path / "g.json")])
    checks = [row["check"] for row in r["rows"]]
    assert all("scipy ok" in c for c in checks), checks
    assert all("DIFFERS" not in c for c in checks)
    assert any("graph500 ok" in c for c in checks)
    assert "pread+copy / gpuio-array" in capsys.readouterr().out
    arr = [row for row in r["rows"] if row["source"] == "gpuio-array"]
    assert len(arr) == 3 and all(0 < row["hit_rate"] <= 1 for row in arr)
    out = load_script("examples/bfs.py").main(["--scale", "8", "--device", "cpu", "--cache-mib", "0.05"])
    assert out["errors"] == [] and "scipy ok" in out["checks"]
