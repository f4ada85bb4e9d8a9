"""The KvikIO baseline of the GEMM app (gpuio_apps.papers.kvikio_store) on the CPU box: KvikIO itself needs libcuda even
for host buffers, so here (1) without kvikio the GEMM run prints one skip line and passes, and (2) KvikioStore's
own logic (the RAID-0 runs, one future per run, the handles, measure_steps' extra baseline) runs over a stand-in
`kvikio` whose CuFile is os.pread/os.pwrite. The real library is exercised on the GPU machine
(test_gpu_kvikio.py)."""
import os
import sys
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gpuio_apps.papers import gemm, kvikio_store  # noqa: E402
from kvikio_util import three_stores  # noqa: E402


def _raid(tmp_path, n=2):
    return [str(tmp_path / f"d{i}.bin") for i in range(n)]


class _Future:
    def __init__(self, n):
        self.n = n

    def get(self):
        return self.n

    def done(self):
        return True


class _CuFile:
    """kvikio.CuFile's calls the store uses, over one fd: (buf, size, file_offset) -> future of bytes moved."""
    opened: list = []

    def __init__(self, path, flags):
        assert flags == "r+"
        self.fd = os.open(path, os.O_RDWR)
        _CuFile.opened.append(self)

    def pread(self, buf, size, off):
        assert isinstance(buf, np.ndarray) and buf.nbytes == size
        return _Future(os.preadv(self.fd, [memoryview(buf)], off))

    def pwrite(self, buf, size, off):
        assert isinstance(buf, np.ndarray) and buf.nbytes == size
        return _Future(os.pwritev(self.fd, [memoryview(buf)], off))

    def fileno(self):
        return self.fd

    def close(self):
        os.close(self.fd)


def _fake_kvikio():
    kv = types.SimpleNamespace(CuFile=_CuFile, __version__="fake")
    kv.defaults = types.SimpleNamespace(get=lambda name: {"thread_pool_nthreads": 1, "task_size": 4 << 20}[name])
    return kv


@pytest.fixture
def fake_kvikio(monkeypatch):
    _CuFile.opened = []
    monkeypatch.setattr(kvikio_store, "load_kvikio", _fake_kvikio)


def test_gemm_without_kvikio_prints_the_skip_line_and_passes(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "kvikio", None)  # import kvikio -> ImportError
    monkeypatch.setitem(sys.modules, "rapids_logger", None)
    with pytest.raises(ImportError, match="kvikio"):
        kvikio_store.load_kvikio()
    r = gemm.run("tiny", str(tmp_path / "g.bin"), "cpu", dtype="fp32")
    assert r["check"].startswith("ok") and "kvikio_s" not in r and "kvikio" in r["kvikio_skipped"]
    lines = [line for line in capsys.readouterr().out.splitlines() if "kvikio baseline skipped" in line]
    assert len(lines) == 1 and lines[0].startswith("gemm-fp32: kvikio baseline skipped: kvikio not importable")


def test_gpuio_kvikio_off_turns_the_baseline_off_before_importing(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "kvikio", None)  # were it imported, the reason would be "not importable"
    monkeypatch.setenv("GPUIO_KVIKIO", "off")
    with pytest.raises(ImportError, match="turned off by GPUIO_KVIKIO=off"):
        kvikio_store.load_kvikio()
    r = gemm.run("tiny", str(tmp_path / "g.bin"), "cpu", dtype="fp32")
    assert r["check"].startswith("ok") and r["kvikio_skipped"] == "turned off by GPUIO_KVIKIO=off"
    monkeypatch.setenv("GPUIO_KVIKIO", "1")  # any other value leaves it on
    with pytest.raises(ImportError, match="not importable"):
        kvikio_store.load_kvikio()


def test_load_kvikio_probes_once_per_process(monkeypatch):
    """Once loaded, the module comes back without a second import or probe (the GEMM app opens a KvikIO store per
    dtype: on the H100 the second probe's clean-up aborted the process, heap corrupted); GPUIO_KVIKIO=off still
    turns it off."""
    loaded = types.SimpleNamespace(__version__="loaded")
    monkeypatch.setattr(kvikio_store, "_LOADED", loaded)
    monkeypatch.setitem(sys.modules, "kvikio", None)  # an import now would raise ImportError
    assert kvikio_store.load_kvikio() is loaded and kvikio_store.load_kvikio() is loaded
    monkeypatch.setenv("GPUIO_KVIKIO", "off")
    with pytest.raises(ImportError, match="turned off by GPUIO_KVIKIO=off"):
        kvikio_store.load_kvikio()


def test_kvikio_store_reads_and_writes_what_the_engine_and_pread_see(tmp_path, fake_kvikio):
    paths = _raid(tmp_path, 3)
    data = torch.from_numpy(np.random.default_rng(2).integers(0, 256, 1 << 20, dtype=np.uint8))
    with three_stores(paths) as (g, p, k, e):
        g.write(e[0], 0, data)                  # engine striping: 64 KiB stripes over 3 files
        out = torch.empty_like(data)
        h = k.read_async(e[0], 4096, out[: (1 << 20) - 8192])  # starts mid-stripe: runs split at stripe edges
        assert h.wait() is not None and h.done()
        assert torch.equal(out[: (1 << 20) - 8192], data[4096:-4096])
        k.write(e[1], 8192, data[:200704])      # 49 blocks across stripe boundaries
        back = torch.empty(200704, dtype=torch.uint8)
        p.read(e[1], 8192, back)
        assert torch.equal(back, data[:200704])
        k.sync()
        assert "compat mode ON" in k.data_path() and k.io.calls["read"] == 1 and k.io.calls["write"] == 1
        with pytest.raises(ValueError, match="whole number"):
            k.read(e[0], 0, torch.empty(100, dtype=torch.uint8))
    assert len(_CuFile.opened) == 3


def test_gemm_runs_the_kvikio_baseline_as_a_second_store(tmp_path, fake_kvikio, capsys):
    r = gemm.run("tiny", _raid(tmp_path), "cpu", dtype="bf16")
    assert r["check"].startswith("ok") and "baseline" not in r["check"]
    assert r["kvikio_s"] > 0 and r["speedup_kvikio"] == pytest.approx(r["kvikio_s"] / r["gpuio_s"])
    assert "compat mode ON" in r["kvikio_data_path"] and "kvikio_skipped" not in r
    assert any(" kvikio " in d for d in r["io_diag"])      # its timed pass printed its I/O line
    assert "kvikio baseline skipped" not in capsys.readouterr().out


def test_gemm_kvikio_baseline_check_fails_on_a_wrong_offset(tmp_path, fake_kvikio, monkeypatch):
    """A KvikIO store that reads one block off must show in the row's check (the baseline is verified too)."""
    orig = kvikio_store.KvikioStore._runs

    def shifted(self, ids):
        return [(d, off + 4096 * (at == 0 and n > 4096), at, n) for d, off, at, n in orig(self, ids)]

    monkeypatch.setattr(kvikio_store.KvikioStore, "_runs", shifted)
    with pytest.raises((AssertionError, OSError), match="differs|short KvikIO"):
        gemm.run("tiny", str(tmp_path / "g.bin"), "cpu", dtype="fp32")
