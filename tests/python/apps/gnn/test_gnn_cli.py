"""The demo and the importer run end to end (tiny sizes) and report what they did."""
import numpy as np
import torch
from rich.console import Console

from gpuio_apps.gnn.demo import DemoConfig, run


def test_demo_tiny_runs_all_backends(tmp_path):
    console = Console(record=True, width=120)
    results = run(DemoConfig(nodes=1500, edges=8000, features=16, batch_size=128, epochs=1,
                             train_fraction=0.2, fanouts=(5, 5), workdir=str(tmp_path), device="cpu",
                             plot=True), console)
    # memory first (the reference, before the memory limit), then gpuio and mmap inside it
    assert [r["backend"] for r in results] == ["memory", "gpuio", "mmap"]
    assert results[1]["losses"] == results[0]["losses"] and results[1]["sums"] == results[0]["sums"]
    text = console.export_text()
    assert "gpuio vs memory: features byte-identical over" in text and "losses identical" in text
    assert "device cache hits" in text and "s/epoch vs mmap" in text
    assert "memory given" in text or "NO memory limit" in text
    assert (tmp_path / "gpuio-demo.png").stat().st_size > 0
    assert np.load(tmp_path / "gpuio-demo-features.npy", mmap_mode="r").shape == (1500, 16)


def test_demo_sampling_in_worker_processes_trains_on_the_same_batches(tmp_path):
    """`gpuio demo --sample-workers 2`: the batches are sampled in 2 processes and gathered here; on the CPU
    they are the very batches of --sample-workers 0 (same features, same losses), for every source."""
    runs = []
    for workers in (0, 2):
        console = Console(record=True, width=120)
        runs.append(run(DemoConfig(nodes=1500, edges=8000, features=16, batch_size=128, epochs=1,
                                   train_fraction=0.2, fanouts=(5, 5), workdir=str(tmp_path), device="cpu",
                                   sample_workers=workers), console))
    assert "sampling in 2 worker processes" in console.export_text()
    for a, b in zip(*runs):
        assert a["backend"] == b["backend"] and a["sums"] == b["sums"] and a["losses"] == b["losses"]


def test_import_npy_pt_raw(tmp_path):
    from typer.testing import CliRunner
    import typer
    from gpuio_apps.cli.importer import import_
    app = typer.Typer()
    app.command()(import_)
    ref = np.arange(6000, dtype=np.float32).reshape(500, 12)
    np.save(tmp_path / "a.npy", ref)
    torch.save(torch.from_numpy(ref), tmp_path / "a.pt")
    ref.tofile(tmp_path / "a.raw")
    runner = CliRunner()
    for src, extra in (("a.npy", []), ("a.pt", []), ("a.raw", ["--dtype", "float32", "--shape", "-1,12"])):
        dst = tmp_path / (src + ".gpuio.npy")
        res = runner.invoke(app, [str(tmp_path / src), str(dst), *extra])
        assert res.exit_code == 0, res.output
        out = np.load(dst, mmap_mode="r")
        assert out.offset == 4096
        np.testing.assert_array_equal(out, ref)
    res = runner.invoke(app, [str(tmp_path / "a.raw"), str(tmp_path / "x.npy")])
    assert res.exit_code != 0 and "--dtype" in res.output


def test_demo_check_fails_on_different_bytes():
    from gpuio_apps.gnn.demo_report import check
    ref = dict(backend="memory", sums=[1, 2, 3], losses=[0.5, 0.4, 0.3])
    same = dict(backend="gpuio", sums=[1, 2, 3], losses=[0.5, 0.4, 0.3])
    assert check([ref, same], "cpu")[0]
    assert not check([ref, dict(same, sums=[1, 2, 4])], "cpu")[0]
    assert not check([ref, dict(same, losses=[0.5, 0.4, 0.31])], "cpu")[0]
    ok, lines = check([ref, dict(same, losses=[0.5, 0.4, 0.30001])], "cuda")
    assert ok and "GPU atomics" in lines[0]
