"""The demo and the importer run end to end (tiny sizes) and report what they did."""
import numpy as np
import torch
from rich.console import Console

from gpuio.gnn.demo import DemoConfig, run


def test_demo_tiny_runs_all_backends(tmp_path):
    console = Console(record=True, width=120)
    results = run(DemoConfig(nodes=1500, edges=8000, features=16, batch_size=128, epochs=1,
                             train_fraction=0.2, fanouts=(5, 5), workdir=str(tmp_path), device="cpu",
                             plot=True), console)
    assert [r["backend"] for r in results] == ["gpuio", "mmap", "memory"]
    assert results[0]["losses"] == results[2]["losses"]
    text = console.export_text()
    assert "losses identical to in-memory" in text and "device cache hits" in text
    assert (tmp_path / "gpuio-demo.png").stat().st_size > 0
    assert np.load(tmp_path / "gpuio-demo-features.npy", mmap_mode="r").shape == (1500, 16)


def test_import_npy_pt_raw(tmp_path):
    from typer.testing import CliRunner
    import typer
    from gpuio.cli.importer import import_
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
