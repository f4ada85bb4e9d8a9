"""The cache-policy benchmark runs tiny and reports every policy at every size."""
from repo_scripts import load_script


def test_cache_policy_benchmark_tiny(tmp_path):
    mod = load_script("benchmarks/cache_policy.py")
    rows = mod.main(["--tiny", "--json", str(tmp_path / "out.json")])
    assert len(rows) == 3 * 4
    assert all(0.0 <= r["hit_rate"] <= 1.0 for r in rows)
    by = {(r["cache_fraction"], r["policy"]): r["hit_rate"] for r in rows}
    assert by[(0.25, "clock")] >= by[(0.05, "clock")]  # a bigger cache never hits less here
    assert (tmp_path / "out.json").stat().st_size > 0
