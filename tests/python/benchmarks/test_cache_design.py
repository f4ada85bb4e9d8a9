"""benchmarks/cache_design.py runs tiny on the CPU: every design reads storage, a larger cache never reads more
over the same batches, and the per-GPU figure is its two ranks' sum."""
import json

from repo_scripts import load_script


def test_cache_design_tiny(tmp_path):
    mod = load_script("benchmarks/cache_design.py")
    out = tmp_path / "r.json"
    r = mod.main(["--root", str(tmp_path / "d"), "--papers", "600", "--features", "16", "--steps", "6",
                  "--batch-size", "32", "--json", str(out)])
    designs = ("a_rank0", "a_rank1", "a_per_gpu", "b_partitioned", "c_one_f", "c_one_2f")
    for k in designs:
        assert r[k]["bytes"] > 0, k
        assert r[k]["bytes"] == sum(r[k]["per_type"].values()), k
    assert r["c_one_2f"]["bytes"] <= r["c_one_f"]["bytes"]  # same batches, twice the cache
    a, ranks = r["a_per_gpu"], (r["a_rank0"], r["a_rank1"])
    assert a["bytes"] == sum(x["bytes"] for x in ranks)
    assert all(a["per_type"][nt] == sum(x["per_type"][nt] for x in ranks) for nt in a["per_type"])
    assert [x["steps"] for x in ranks] == [6, 6] and r["b_partitioned"]["steps"] == 12
    assert r["c_one_f"]["seeds"] == 6 * 32  # (c) is the first 6 full batches of (b)'s sequence
    assert r["ratios"]["b/a"]["all"] == r["b_partitioned"]["bytes"] / a["bytes"]
    assert json.loads(out.read_text())["results"]["c_one_f"]["bytes"] == r["c_one_f"]["bytes"]
