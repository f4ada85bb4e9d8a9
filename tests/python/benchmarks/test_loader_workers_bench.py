"""benchmarks/loader_workers.py runs tiny on the CPU: DataLoader workers over gpuio and np.memmap, every row
checked, the I/O seen in the processes that did it, the judged ratios reported; and the demo with its sampling in
worker processes beside the loader thread."""
import json
import os

import pytest

from repo_scripts import load_script


def test_loader_part_tiny(tmp_path):
    mod = load_script("benchmarks/loader_workers.py")
    out = tmp_path / "r.json"
    ratios = mod.main(["--tiny", "--parts", "loader", "--workdir", str(tmp_path), "--json", str(out)])
    assert set(ratios) == {"gpuio_workers_vs_zero_min", "gpuio_vs_memmap_min", "gpuio_vs_memmap_plain_min"}
    assert all(v > 0 for v in ratios.values())
    saved = json.loads(out.read_text())["loader"]
    sources = ("gpuio", "memmap")
    assert set(saved["median"]) == {f"{n}/{m}/{s}" for n, m in (("0", "-"), ("2", "fork")) for s in sources}
    for key, passes in saved["passes"].items():
        workers = int(key.split("/")[0])
        for p in passes:
            assert p["rows"] > 0 and p["rows_s"] > 0
            readers = [r for r in p["readers"] if r != os.getpid()]
            assert len(readers) == (0 if workers == 0 else len(p["readers"]))  # who read: main, or workers only
            if key.endswith("gpuio") and p["main_read_bytes"] >= 0:  # O_DIRECT: every row from the device
                assert (p["workers_read_bytes"] if workers else p["main_read_bytes"]) > 0
                if workers:
                    assert p["main_read_bytes"] < p["workers_read_bytes"]
    assert set(saved["plain"]) == {"0/-", "2/fork"} and all(p["rows"] > 0 for p in saved["plain"].values())
    assert not os.path.exists(f"/sys/fs/cgroup/memory/gpuio-loader-workers-{os.getpid()}")  # the cgroup is gone


@pytest.mark.slow
def test_demo_part_tiny(tmp_path):
    mod = load_script("benchmarks/loader_workers.py")
    ratios = mod.main(["--tiny", "--parts", "demo", "--workdir", str(tmp_path), "--json", str(tmp_path / "d.json")])
    assert set(ratios) == {"demo_epoch_2_vs_0"} and ratios["demo_epoch_2_vs_0"] > 0
    runs = json.loads((tmp_path / "d.json").read_text())["demo"]["runs"]
    assert set(runs) == {"0", "2"} and all(r[0]["headline"] > 0 for r in runs.values())
