"""`gpuio demo --hetero` tells `gpuio demo`'s story: in-memory, gpuio and mmap columns in one table, out of core by
default (a memory cgroup where this process may make one), the checks (features byte-identical, losses identical
where the kernels are deterministic), what limits each run in words, one headline; `judged:` lines only with
--judge. The pieces the summary is made of (the loss comparison, the regime words, the memory given) are checked on
their own below."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("torch_geometric")

from gpuio_apps.cli import main  # noqa: E402
from gpuio_apps.gnn import demo_report  # noqa: E402
from gpuio_apps.gnn.hetero_memory import HEADROOM_BYTES, RunMemory  # noqa: E402
from gpuio_apps.gnn.hetero_report import limit_lines, meaning, print_summary  # noqa: E402

HEADLINE = re.compile(r"^gpuio \d+\.\d\d s/epoch vs mmap \d+\.\d\d s/epoch (with .*): \d+\.\dx$")


def _main(argv, capsys):
    with pytest.raises(SystemExit) as ei:
        main(argv)
    out = capsys.readouterr()
    return ei.value.code, out.out, out.err


def test_default_story_out_of_core_table_checks_limits_headline(tmp_path, monkeypatch, capsys, one_thread):
    """The defaults but the sizes: 132 MiB of features (4 x the 32 MiB floor of the memory given), a few tiny
    steps; from an empty directory, as the README runs it."""
    monkeypatch.chdir(tmp_path)
    code, out, err = _main(["demo", "--hetero", "--papers", "21500", "--features", "512", "--steps", "4",
                            "--batch-size", "16", "--eval-nodes", "32", "--device", "cpu", "--time-cap", "0"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert (tmp_path / "gpuio-igbh" / "meta.json").exists()
    assert not [x for x in lines if x.startswith("judged:")], "judged lines without --judge"
    header = next(x for x in lines if "┃" in x)
    assert re.search(r"memory\s.*gpuio\s.*mmap", header), header  # one column per source, reference first
    for row in ("epoch s", "feature loading s", "trainer waiting s", "compute s", "rows from storage"):
        assert any(x.strip("│ ").startswith(row) for x in lines), row
    for src in ("gpuio", "mmap"):
        assert f"{src} vs memory: features byte-identical over 4 batches; losses identical" in out
    regime = lines[lines.index("what limits each run:") + 1:]
    assert [x.split(":")[0].strip() for x in regime[:4]] == ["memory", "gpuio", "mmap", "so"]
    given = next(x for x in lines if x.startswith("memory given:"))
    headline = HEADLINE.match(lines[-1])
    assert headline, lines[-1]
    if "NO limit" in given:  # no cgroup here (not root): said, and the headline does not claim out of core
        assert headline.group(1) == "with no memory limit (the page cache may hold the features)"
    else:
        assert "cgroup v" in given and "4.0x larger" in given, given
        assert headline.group(1) == "with features 4x larger than the memory given"
        mmap = next(x for x in lines if x.startswith("mmap: memory cgroup peak"))
        mib = int(re.match(r"memory given: ([\d,]+) MiB", given).group(1).replace(",", ""))
        held = int(re.search(r"at most ([\d,]+) MiB at a step's end; limit ", mmap).group(1).replace(",", ""))
        assert held <= mib + 1, (held, mib)  # mmap, the baseline, ran capped: its page cache within the memory given
        assert "no limit" in next(x for x in lines if x.startswith("gpuio: memory cgroup peak"))  # gpuio: counted


def test_judge_flag_adds_the_full_report_and_judged_lines(tmp_path, capsys, one_thread):
    argv = ["demo", "--hetero", "--root", str(tmp_path / "igbh"), "--papers", "300", "--features", "8", "--steps", "3",
            "--batch-size", "16", "--eval-nodes", "32", "--device", "cpu", "--memory-fraction", "0",
            "--backends", "memory,gpuio"]
    code, out, err = _main(argv + ["--judge"], capsys)
    assert code == 0, err
    judged = [x for x in out.splitlines() if x.startswith("judged: ")]
    assert any(x.startswith("judged: scale:") for x in judged)
    assert any("same losses as in-memory features (gpuio): losses identical" in x for x in judged)
    assert "memory given: NO limit (--memory-fraction 0)" in out or "memory given: the cgroup this process" in out
    assert "gpuio vs memory: features byte-identical over 3 batches; losses identical" in out  # the summary too
    code, out, err = _main(argv, capsys)  # the same without the flag: the summary alone
    assert code == 0 and "judged:" not in out and "rank(s): " not in out, out


# -- the loss comparison ------------------------------------------------------------------------------------
def _row(name, losses, sums=(1, 2, 3), **kw):
    """A summary row (hetero_report.demo_rows' keys) with the figures given."""
    row = dict(backend=name, kind=name, structure="file", losses=list(losses), sums=list(sums), epoch_s=1.0,
               stall_s=0.0, compute_s=1.0, feature_s=0.1, sample_s=0.0, capped=False, batches_run=len(losses),
               batches_per_epoch=len(losses), test_acc=0.5, storage_mbs=0.0)
    row.update(kw)
    return row


def test_losses_must_be_identical_where_the_kernels_are_deterministic():
    ref, same, off = _row("memory", [2.0, 1.5]), _row("gpuio", [2.0, 1.5]), _row("gpuio", [2.0, 1.5001])
    assert demo_report.check([ref, same], "cpu")[0]
    ok, lines = demo_report.check([ref, off], "cpu")  # the CPU's kernels: exact expected
    assert not ok and "losses DIFFER" in lines[0]
    ok, lines = demo_report.check([ref, off], "cuda", exact_losses=True, kernels="deterministic CUDA kernels")
    assert not ok and "losses DIFFER" in lines[0]  # deterministic CUDA kernels: a difference is a failure
    ok, lines = demo_report.check([ref, same], "cuda", exact_losses=True, kernels="deterministic CUDA kernels")
    assert ok and lines[0].endswith("losses identical (deterministic CUDA kernels)")
    ok, lines = demo_report.check([ref, off], "cuda", rounding="GPU atomics: why")  # fast kernels: rounding
    assert ok and "losses within 6.7e-05 relative (GPU atomics: why)" in lines[0]
    ok, lines = demo_report.check([ref, dict(same, sums=[1, 2, 4])], "cuda")
    assert not ok and "features DIFFER" in lines[0]  # different bytes are never rounding


class _Cfg:
    steps, warmup_steps, memory_fraction = 2, -1, 0.25

    def __init__(self, device):
        self.device = device


def _result(backend, losses):
    return dict(backend=backend, label=backend, structure="file", steps=len(losses), run_s=2.0,
                step_end_s=[1.0, 2.0][:len(losses)], losses=losses, sums=[7, 8], stall_s=0.1, compute_s=1.5,
                feature_s=0.2, sample_s=0.0, capped=False, test_acc=0.5)


@pytest.mark.parametrize("device, deterministic, expect", [
    ("cpu", None, "losses DIFFER"),
    ("cuda", "", "losses DIFFER"),
    ("cuda", None, "GPU atomics: torch's fast CUDA kernels add in a different order each run"),
    ("cuda", "index_add_cuda_ does not have a deterministic implementation", "rounding: not every op has a "
                                                                              "deterministic CUDA kernel: index_add"),
])
def test_summary_compares_losses_as_the_kernels_allow(device, deterministic, expect):
    out = []
    print_summary([_result("memory", [2.0, 1.5]), _result("gpuio", [2.0, 1.5001]), _result("mmap", [2.0, 1.5])],
                  _Cfg(device), out.append, larger=4.0, deterministic=deterministic, cores=16)
    text = "\n".join(out)
    gpuio = next(x for x in out if x.startswith("gpuio vs memory"))
    assert expect in gpuio, gpuio
    assert "mmap vs memory: features byte-identical over 2 batches; losses identical" in text
    assert ("check FAILED" in text) == (expect == "losses DIFFER")
    assert out[-1].startswith("gpuio 2.00 s/epoch vs mmap 2.00 s/epoch with features 4x larger")


# -- what limits a run, in words -----------------------------------------------------------------------------
def test_limit_words_name_the_cpu_when_compute_slows_and_nobody_waits():
    """The 2-core box: gpuio's trainer waited 4 % of the epoch while its compute took 4.3 x the in-memory run's
    (loading threads on the same cores): not "compute-bound: loading keeps up"."""
    mem = _row("memory", [1.0], epoch_s=1.74, stall_s=0.04, compute_s=1.67)
    gpuio = _row("gpuio", [1.0], epoch_s=7.69, stall_s=0.30, compute_s=7.16, feature_s=1.9, device_rate=1.0)
    mmap = _row("mmap", [1.0], epoch_s=10.3, stall_s=6.4, compute_s=3.5, feature_s=5.4)
    lines = limit_lines([mem, gpuio, mmap], cores=2)
    assert lines[0].startswith("memory: the model's compute: loading keeps up")
    assert lines[1].startswith("gpuio: the CPU:") and "4.3x as long" in lines[1] and "2 CPU cores" in lines[1]
    assert lines[2].startswith("mmap: waiting for data:") and "page faults" in lines[2]
    assert "more cores" in meaning([mem, gpuio, mmap], 4.0, cores=2)


def test_judged_regime_of_the_two_core_case_is_cpu_bound():
    """--judge's regime line over a run's ranks says the same of the 2-core case: not "loading keeps up"."""
    from gpuio_apps.gnn.hetero_report import regime
    mem = dict(backend="memory", steps=20, compute_s=1.67)
    gpuio = dict(backend="gpuio", steps=20, compute_s=7.16)
    ranks = [dict(run_s=7.69, stall_s=0.30, sample_s=0.0, feature_s=1.9)]
    assert regime(gpuio, ranks, mem)[1].startswith("CPU-bound: loading takes the cores training needs (compute 4.3x")
    assert regime(gpuio, ranks)[1] == "compute-bound: loading keeps up"  # no in-memory run to compare with
    assert regime(dict(gpuio, compute_s=1.8), ranks, mem)[1] == "compute-bound: loading keeps up"


def test_limit_words_name_the_disk_and_sampling():
    mem = _row("memory", [1.0], epoch_s=1.0, stall_s=0.01, compute_s=0.9)
    disk = _row("gpuio", [1.0], epoch_s=4.0, stall_s=3.0, compute_s=0.9, feature_s=3.5, storage_mbs=410.0,
                device_rate=0.4)
    lines = limit_lines([mem, disk], cores=16)
    assert lines[1].startswith("gpuio: waiting for data:") and "the disk sets the pace (410 MB/s read" in lines[1]
    assert "faster disk" in meaning([mem, disk], 4.0, cores=16)
    sampling = dict(disk, sample_s=3.6)
    assert "sampling neighbours" in limit_lines([mem, sampling], cores=16)[1]
    keeps = _row("gpuio", [1.0], epoch_s=1.1, stall_s=0.05, compute_s=0.95)
    assert limit_lines([mem, keeps], cores=16)[1].startswith("gpuio: the model's compute: loading keeps up")
    assert "keeps the model busy" in meaning([mem, keeps], 4.0, cores=16)


# -- the memory given ---------------------------------------------------------------------------------------
def test_memory_given_floor_tiers_and_what_it_says():
    m = RunMemory(0.25, 400 << 20)
    assert m.given == 100 << 20 and not m.raised
    small = RunMemory(0.25, 1 << 20)  # a table smaller than the headroom: twice the headroom, said
    assert small.given == 2 * HEADROOM_BYTES and small.raised
    none = RunMemory(0.0, 400 << 20)
    if none.mode == "outer":  # this process already runs under a limit: kept, whatever the fraction
        assert "the cgroup this process runs in" in none.describe()
    else:
        assert none.mode == "none" and none.tiers_bytes() is None and none.times_larger() is None
        assert none.describe().startswith("memory given: NO limit (--memory-fraction 0)")
    ranks = RunMemory(0.25, 400 << 20, world=2)
    assert ranks.mode in ("none", "outer") and (ranks.mode == "outer" or "torchrun" in ranks.why)
    for working in (10 << 20, 200 << 20):  # gpuio's engine buffers: some, and more than the memory given
        g = RunMemory(0.25, 400 << 20)
        if g.mode != "own":
            pytest.skip(f"this process already runs under a memory limit ({g.mode})")
        g.enter(lambda usage, working=working: working)
        try:
            if g.lim is None:
                pytest.skip(g.why)
            assert g.times_larger() == 4.0 and "cgroup v" in g.describe()
            if working < g.given:  # the tiers fill 80 % of what the headroom and the engine buffers leave
                assert g.tiers_bytes() == int(0.8 * ((100 << 20) - HEADROOM_BYTES - working))
            else:  # no tiers, and it says so
                assert g.tiers_bytes() == 0
                assert "working memory alone is 100 MiB over them: no cache tiers" in g.describe()
        finally:
            g.leave()


# -- deterministic kernels ------------------------------------------------------------------------------------
def test_deterministic_kernels_warn_only_catch_the_alerts_and_restore():
    """On CUDA the job runs torch's deterministic kernels warn-only: an op without one (torch warns "... does not
    have a deterministic implementation") is kept for the report, from any thread, instead of stopping a run;
    other warnings still show; stop() puts torch and the warning filters back."""
    import threading
    import warnings

    import torch

    from gpuio_apps.gnn.hetero_kernels import DeterministicKernels

    class Cfg:
        deterministic, device = True, "cuda"
    assert DeterministicKernels(type("C", (), dict(deterministic=True, device="cpu"))()).verdict() is None
    before = torch.are_deterministic_algorithms_enabled()
    k = DeterministicKernels(Cfg())
    k.start()
    try:
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
        assert k.verdict() == ""  # nothing warned yet: every op so far had a deterministic kernel
        t = threading.Thread(target=warnings.warn, args=("scatter_x_cuda does not have a deterministic implementation, "
                                                         "but you set it",))
        t.start()
        t.join()
        with pytest.warns(UserWarning, match="unrelated"):
            warnings.warn("unrelated")
    finally:
        k.stop()
    assert k.verdict() == "scatter_x_cuda does not have a deterministic implementation, but you set it"
    assert torch.are_deterministic_algorithms_enabled() == before


def test_a_limit_the_process_was_started_under_counts_only_where_it_keeps_features_out_of_core(monkeypatch):
    from gpuio_apps.gnn import hetero_memory

    class Outer:
        def __init__(self, limit):
            self.limit = limit

        def effective_limit_bytes(self):
            return self.limit

    monkeypatch.setattr(hetero_memory.MemoryLimit, "current", staticmethod(lambda: Outer(128 << 30)))
    assert RunMemory(0.25, 2 << 30).mode == "own"  # the machine's own 128 GiB group: not a limit on 2 GiB
    monkeypatch.setattr(hetero_memory.MemoryLimit, "current", staticmethod(lambda: Outer(512 << 20)))
    kept = RunMemory(0.25, 2 << 30)
    assert kept.mode == "outer" and kept.outer == 512 << 20
