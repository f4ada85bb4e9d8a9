"""Bad command-line input: each case is refused before any work starts, with exactly one line
on stderr that names the option, exit status 2, and no traceback unless `gpuio --debug`."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from gpuio import defaults
from gpuio_apps.cli import main
from repo_scripts import ROOT

RAW_FLOATS = 8000
WORKERS_MAX = defaults.knob("workers").max


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A folder with good and bad inputs, as the current directory."""
    a = np.arange(RAW_FLOATS, dtype=np.float32)
    a.tofile(tmp_path / "raw.bin")
    np.save(tmp_path / "good.npy", a.reshape(100, 80))
    whole = (tmp_path / "good.npy").read_bytes()
    (tmp_path / "trunc.npy").write_bytes(whole[:len(whole) // 2])
    (tmp_path / "corrupt.npy").write_bytes(b"\x93NUMPY\x01\x00{'descr': nonsense" + whole[40:])
    (tmp_path / "bad.pt").write_bytes(b"not a torch file" * 64)
    (tmp_path / "adir").mkdir()
    np.save(tmp_path / "strings.npy", np.array(["a", "bc"]))
    import torch
    torch.save(torch.eye(3).to_sparse(), tmp_path / "sparse.pt")
    torch.save(torch.empty(3, 4, device="meta"), tmp_path / "meta.pt")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _cuda() -> bool:
    import torch
    return torch.cuda.is_available()


# (argv, option the error line must name, other text it must contain, modules to hide)
CASES = [
    (["import", "trunc.npy", "o.npy"], "SRC", "truncated", ()),
    (["import", "corrupt.npy", "o.npy"], "SRC", "not a valid .npy", ()),
    (["import", "bad.pt", "o.npy"], "SRC", ".pt", ()),
    (["import", "raw.bin", "o.npy", "--dtype", "foo"], "--dtype", "'foo'", ()),
    (["import", "sparse.pt", "o.npy"], "SRC 'sparse.pt'", "sparse_coo tensor", ()),
    (["import", "meta.pt", "o.npy"], "SRC 'meta.pt'", "meta device", ()),
    (["import", "strings.npy", "o.npy"], "SRC 'strings.npy'", "<U2", ()),
    (["import", "good.npy", "o.npy", "--block-size", "1000"], "--block-size", "1000", ()),
    (["import", "good.npy", "/proc/o.npy"], "DST", "/proc/o.npy", ()),
    (["import", "raw.bin", "o.npy", "--dtype", "float32", "--shape", "7,-1"], "--shape", str(RAW_FLOATS), ()),
    (["import", "raw.bin", "o.npy", "--dtype", "float32", "--shape", "7,1000"], "--shape", str(RAW_FLOATS), ()),
    (["import", "good.npy", "good.npy"], "DST", "--force", ()),
    (["bench", "--size", "-5M"], "--size", "-5M", ()),
    (["bench", "--file", "adir"], "--file", "directory", ()),
    (["bench", "--backend", "nosuch"], "--backend", "nosuch", ()),
    (["bench", "--plot", "/proc/x.png"], "--plot", "/proc/x.png", ()),
    (["bench", "--plot", "x.png"], "--plot", "pip install 'gpuio[plot]'", ("matplotlib",)),
    (["bench", "--repeats", "0"], "--repeats", "", ()),
    # one range, whichever end: the engine's limit, from gpuio.defaults, and the benchmark's own minimum
    (["bench", "--workers", "0"], "--workers 0", f"must lie in [1, {WORKERS_MAX}]", ()),
    (["bench", "--workers", "1000"], "--workers 1000", f"must lie in [1, {WORKERS_MAX}]", ()),
    (["bench", "--nosuch"], "--nosuch", "", ()),
    (["demo", "--model", "foo"], "--model", "'foo'", ()),
    (["demo", "--policy", "foo"], "--policy", "'foo'", ()),
    (["demo", "--backends", "foo"], "--backends", "'foo'", ()),
    (["demo", "--nodes", "-5"], "--nodes", "-5", ()),
    (["demo", "--batch-size", "-3"], "--batch-size", "-3", ()),
    (["demo", "--epochs", "-1"], "--epochs", "-1", ()),
    (["demo", "--sample-workers", "-2"], "--sample-workers", "-2", ()),
    (["demo", "--fanouts", "25,x"], "--fanouts", "25,x", ()),
    (["demo", "--cache-fraction", "5"], "--cache-fraction", "5", ()),
    (["demo", "--device", "cuda"], "--device", "no CUDA GPU", ()),
    (["demo", "--workdir", "no/such/dir"], "--workdir", "no/such/dir", ()),
    (["demo", "--plot"], "--plot", "pip install 'gpuio[plot]'", ("matplotlib",)),
    (["demo"], "gpuio demo", "pip install 'gpuio[pyg]'", ("torch_geometric",)),
    (["sim", "synth", "--queue-depth", "0"], "--queue-depth", "0", ()),
    (["sim", "replay", "no-such.trace"], "TRACE", "no-such.trace", ()),
]


@pytest.mark.parametrize("argv,option,text,hide", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_input_is_one_line_exit_2(workdir, capsys, monkeypatch, argv, option, text, hide):
    if "cuda" in argv and _cuda():
        pytest.skip("a CUDA GPU is available here: --device cuda is valid")
    for m in hide:  # the optional package is "not installed" for this run
        monkeypatch.setitem(sys.modules, m, None)
    before = sorted(os.listdir(workdir))
    with pytest.raises(SystemExit) as ei:
        main(argv)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert ei.value.code == 2, err
    assert len(lines) == 1, f"expected one line, got:\n{err}"
    assert option in lines[0] and text in lines[0], lines[0]
    assert "Traceback" not in err
    assert sorted(os.listdir(workdir)) == before, "work started (files written) before the input was checked"


def _run(*args, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-m", "gpuio", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def test_real_process_one_line_and_debug_traceback(workdir):
    r = _run("demo", "--epochs", "-1", cwd=workdir)
    assert r.returncode == 2 and r.stderr.splitlines() == [r.stderr.strip()] and "--epochs" in r.stderr
    assert "Traceback" not in r.stderr
    r = _run("--debug", "demo", "--epochs", "-1", cwd=workdir)  # the traceback, and still exit 2: bad input
    assert r.returncode == 2 and "Traceback" in r.stderr and r.stderr.splitlines()[-1].startswith("gpuio: error: --epochs")


def test_version_and_python_m(workdir):
    import re

    import gpuio
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^version = "(.+)"$', pyproject, re.M).group(1) == gpuio.__version__
    r = _run("--version", cwd=workdir)
    assert r.returncode == 0 and r.stdout.strip() == f"gpuio {gpuio.__version__}"
    r = _run("--help", cwd=workdir)
    assert r.returncode == 0 and all(c in r.stdout for c in ("info", "demo", "bench", "import", "sim"))


def test_import_of_an_exact_shape_still_works(workdir, capsys):
    with pytest.raises(SystemExit) as ei:
        main(["import", "raw.bin", "o.npy", "--dtype", "float32", "--shape", "80,-1"])
    assert ei.value.code == 0, capsys.readouterr().err
    out = np.load(workdir / "o.npy", mmap_mode="r")
    assert out.shape == (80, 100) and np.array_equal(np.asarray(out).ravel(), np.arange(RAW_FLOATS, dtype=np.float32))


def test_error_during_the_work_is_one_line_exit_1(workdir):
    # valid options, then the data file cannot be written (a file-size limit: EFBIG): a run-time failure
    from fs_util import file_size_limit, listing
    before = listing(workdir)
    r = subprocess.run([sys.executable, "-m", "gpuio", "bench", "--quick", "--json", "b.json"], capture_output=True,
                       text=True, cwd=workdir, timeout=120, preexec_fn=file_size_limit(1 << 20),
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "File too large" in r.stderr and "--debug" in r.stderr and "Traceback" not in r.stderr
    assert listing(workdir) == before  # the partial data file went with the failure
