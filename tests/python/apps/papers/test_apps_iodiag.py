"""The applications' I/O diagnostic (gpuio_apps.papers.iodiag), the store's record of writes in flight that keeps an
overlapping CUDA read ordered, and GEMM's resident block row of A, on the CPU."""
import os
import subprocess
import sys

import pytest
import torch

from gpuio_apps.papers import common, gemm
from gpuio_apps.papers.iodiag import IoCounters, PassProbe, PendingWrites
from gpuio_apps.papers.pipeline import Step, buffer, run_steps
from gpuio_apps.papers.store import Store
from gpuio.future import Future
from repo_scripts import ROOT

CPU = torch.device("cpu")
REPO = str(ROOT)


class _Switch:
    """The work of a request the test finishes by hand (finished = True): a gpuio.Future's Work."""

    def __init__(self):
        self.finished = False

    def poll(self):
        return self.finished

    def block(self, timeout):
        if not self.finished:
            raise OSError(110, "the test has not finished it")


def _req(done=False, failed=False):
    """A request's gpuio.Future, as the stores return them: pending (its work to finish: .work.finished = True),
    done, or failed (its done() is True; its wait() raises)."""
    if failed:
        return Future.failed(OSError(5, "failed request"))
    return Future.completed() if done else Future(_Switch())


def test_pending_writes_overlap_only_while_in_flight():
    pw = PendingWrites()
    w1, w2 = _req(), _req()
    pw.add(100, 200, w1)
    pw.add(300, 310, w2)
    assert pw.overlaps(150, 160) and pw.overlaps(199, 400) and pw.overlaps(0, 101)
    assert not pw.overlaps(200, 300) and not pw.overlaps(0, 100) and not pw.overlaps(310, 320)
    w1.work.finished = True
    assert not pw.overlaps(150, 160) and len(pw) == 1  # the finished write is dropped when it is next met
    assert pw.overlaps(305, 306)
    pw.add(500, 510, _req(failed=True))  # a failed write reports itself through its own wait()
    assert not pw.overlaps(500, 510)
    with pytest.raises(ValueError, match=r"empty block range \[7, 7\)"):
        pw.add(7, 7, _req())


def test_pending_writes_prune_keeps_the_list_short():
    pw = PendingWrites()
    for i in range(1000):
        pw.add(i, i + 1, _req(done=True))
    assert len(pw) <= 64
    live = _req()
    pw.add(5000, 5001, live)
    assert pw.overlaps(5000, 5001)


def test_io_counters_count_calls_bytes_and_calls_in_flight():
    io = IoCounters()
    reqs = [_req() for _ in range(3)]
    for r in reqs:
        io.submitted("read", 1 << 20, r, "host")
    assert io.calls["read"] == 3 and io.bytes["read"] == 3 << 20
    assert io.depth_max["read"] == 3 and io.depth_sum["read"] == 1 + 2 + 3
    reqs[0].work.finished = reqs[1].work.finished = True
    io.submitted("read", 1 << 20, _req(), "device")  # the two finished at the front are pruned first
    assert io.depth_sum["read"] == 6 + 2
    io.submitted("write", 4096, _req(done=True), "-")  # a synchronous call: in flight 1 (itself)
    assert io.depth_max["write"] == 1
    s = io.summary("read")
    assert s.startswith("reads 4 x 1.00 MiB (ids: device 1, host 3), in flight at submit mean 2.0 max 3"), s
    assert io.summary("write").startswith("writes 1 x 0.00 MiB, in flight")
    with pytest.raises(ValueError, match="op='trim'"):
        io.submitted("trim", 1, _req(), "-")


def test_pass_probe_line_names_calls_engine_requests_and_sizes(tmp_path):
    g, p = common.open_pair(str(tmp_path / "s.bin"), 8 << 20)
    with g, p:
        e = common.alloc_both(g, p, "x", 4 << 20)
        o = common.alloc_both(g, p, "y", 1 << 20)
        out = buffer(1 << 20, CPU)  # 4 KiB aligned: written by O_DIRECT in place (an unaligned one is staged)
        steps = [Step(reads=[(e, i << 20, 1 << 20)], compute=lambda b: [out.copy_(b[0])], writes=[(o, 0)],
                      out_nbytes=[1 << 20]) for i in range(4)]
        for store in (g, p):
            probe = PassProbe(store)
            run_steps(store, steps, CPU, "pipeline")
            line = probe.line("t")
            assert store.io.calls == {"read": 4, "write": 4}
            assert store.io.bytes == {"read": 4 << 20, "write": 4 << 20}
            assert "reads 4 x 1.00 MiB" in line and "writes 4 x 1.00 MiB" in line
            if store is g:  # 8 MiB in 1 MiB device requests (io_bytes_max), O_DIRECT in place
                assert "engine requests 8 x 1.00 MiB (0% staged" in line, line
            else:
                assert "engine requests" not in line and "[pread]" in line


def test_store_cuda_ids_option_is_checked(tmp_path):
    with pytest.raises(ValueError, match="cuda_ids='gpu' is not one of host, device"):
        Store(str(tmp_path / "x.bin"), 1 << 20, cuda_ids="gpu")


def test_gemm_reads_a_block_row_once_per_row(tmp_path):
    app = gemm.Gemm(512, 128, "fp32")
    g, p = common.open_pair(str(tmp_path / "g.bin"), 3 * app.matrix_bytes)
    with g, p:
        app.alloc(g, p)
        app.prepare(g)
        steps = app.steps(g)
        row = app.nt * app.tile_bytes
        assert [len(s.reads) for s in steps] == [2, 1, 1, 1] * app.nt
        r = run_steps(g, steps, CPU, "pipeline")
        assert r["bytes_read"] == (app.nt + app.nt ** 2) * row  # not 2 nt^2 rows: A's row is kept
        assert app.verify(g).startswith("ok")
        with pytest.raises(RuntimeError, match="without its block row of A"):
            run_steps(g, app.steps(g)[1:2], CPU, "pipeline")


def test_apps_io_path_benchmark_smoke(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "apps_io_path.py"), "--mib", "8",
                        "--panel-mib", "4", "--chunk-mib", "1", "--slots", "4", "--reread", "2"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    for name in ("pread x 2", "engine panel (host)", "engine 1 MiB chunks, 1", "engine 1 MiB chunks, 4"):
        assert name in r.stdout, r.stdout
    assert "engine requests 8 x 1.00 MiB" in r.stdout
    assert not os.path.exists(tmp_path / "gpuio-apps-io-path.bin")
