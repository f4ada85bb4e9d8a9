"""`gpuio` never loses data and checks resources first: an existing file it did not write is refused without
--force, a non-regular one always; outputs appear whole or not at all (ENOSPC, EFBIG, Ctrl-C leave
nothing); sizes, counts and limits are refused before any work, in one line naming the option."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fs_util import fill, file_size_limit, kind_of, listing, non_regular, small_tmpfs
from gpuio_apps.cli import main
from repo_scripts import ROOT

QUICK = ["bench", "--quick", "--size", "33M", "--workload", "seq 1MiB read", "--backend", "uring", "--engine-qd", "32"]


@pytest.fixture
def cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _gpuio(argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as ei:
        main(argv)
    out, err = capsys.readouterr()
    return ei.value.code, out, err


def _refused(argv, capsys, where: Path, *texts, code: int = 2) -> str:
    """Runs argv, expects exit `code` with one stderr line holding every text, and `where` unchanged."""
    before = listing(where)
    rc, _, err = _gpuio(argv, capsys)
    assert rc == code and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(t in err for t in texts), err
    assert listing(where) == before, "files changed"
    return err


def _run(*args, cwd, preexec_fn=None):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-m", "gpuio", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300, preexec_fn=preexec_fn)


# -- data loss -------------------------------------------------------------------------------------------
def test_bench_refuses_a_file_it_did_not_write(cwd, capsys):
    (cwd / "notes.txt").write_text("my notes\n")
    _refused(QUICK + ["--file", "notes.txt"], capsys, cwd, "--file 'notes.txt'", "not written by gpuio", "--force")
    _refused(["bench", "apps", "--workload", "vecadd", "--file", "notes.txt"], capsys, cwd, "--file 'notes.txt'",
             "--force")  # the apps' store files
    assert (cwd / "notes.txt").read_text() == "my notes\n"


def test_bench_reuses_its_own_data_file_and_json_but_asks_before_replacing_others(cwd, capsys):
    rc, _, err = _gpuio(QUICK + ["--plot", "r.png"] if _has_matplotlib() else QUICK, capsys)
    assert rc == 0, err
    data = cwd / "gpuio-bench.dat"
    written = data.stat().st_mtime_ns
    (cwd / "other.json").write_text('{"mine": 1}\n')
    _refused(QUICK + ["--json", "other.json"], capsys, cwd, "--json 'other.json'", "not written by gpuio", "--force")
    if _has_matplotlib():
        _refused(QUICK + ["--plot", "r.png"], capsys, cwd, "--plot 'r.png'", "--force")
    assert (cwd / "other.json").read_text() == '{"mine": 1}\n'
    rc, out, err = _gpuio(QUICK, capsys)  # again, as it was: its own data file and JSON are gpuio's to reuse
    assert rc == 0, err
    assert data.stat().st_mtime_ns == written, "gpuio's own complete data file was rewritten"
    assert json.loads((cwd / "gpuio-bench.json").read_text())["meta"]["data_written_now"] is False
    rc, out, err = _gpuio(QUICK + ["--json", "other.json", "--force"], capsys)
    assert rc == 0, err
    assert json.loads((cwd / "other.json").read_text())["written_by"] == "gpuio bench"
    assert "--quick: one 0.05 s pass per configuration" in out  # why a quick ratio may stray from 1
    assert not [n for n in listing(cwd) if n.startswith(".")], "a temporary file was left"


def _has_matplotlib() -> bool:
    import importlib.util
    return importlib.util.find_spec("matplotlib") is not None


@pytest.mark.parametrize("kind", ["chardev", "fifo", "directory", "symlink-dev", "socket"])
def test_non_regular_outputs_are_refused_even_with_force(tmp_path, capsys, kind):
    p = non_regular(kind, tmp_path)
    mode = kind_of(p)
    np.save(tmp_path / "a.npy", np.arange(12, dtype=np.float32).reshape(3, 4))
    for argv, option in ((["import", str(tmp_path / "a.npy"), str(p), "--force"], "DST"),
                         (QUICK + ["--file", str(p), "--force"], "--file"),
                         (QUICK + ["--json", str(p), "--force", "--file", str(tmp_path / "d.dat")], "--json")):
        _refused(argv, capsys, tmp_path, option, "not a regular file", "never writes over one")
        assert kind_of(p) == mode


def test_import_replaces_only_with_force_and_never_the_source(cwd, capsys):
    np.save(cwd / "a.npy", np.arange(12, dtype=np.float32).reshape(3, 4))
    assert _gpuio(["import", "a.npy", "t.npy"], capsys)[0] == 0
    _refused(["import", "a.npy", "t.npy"], capsys, cwd, "DST 't.npy'", "--force")
    np.save(cwd / "b.npy", np.ones((5, 2), np.int64))
    assert _gpuio(["import", "b.npy", "t.npy", "--force"], capsys)[0] == 0
    assert np.array_equal(np.load(cwd / "t.npy"), np.ones((5, 2), np.int64))
    _refused(["import", "a.npy", "a.npy", "--force"], capsys, cwd, "DST 'a.npy'", "source")
    assert listing(cwd) == ["a.npy", "b.npy", "t.npy"]


def test_import_that_runs_out_of_space_leaves_nothing(tmp_path, capsys):
    from gpuio._dtypes import element_type
    from gpuio_apps.cli.importer import convert
    src = np.arange(3 << 20, dtype=np.float32).reshape(-1, 1024)  # 12 MiB
    f32 = element_type("float32")
    with small_tmpfs(tmp_path / "fs", 8 << 20) as fs:
        np.save(tmp_path / "src.npy", src)
        # refused before the work, with the numbers
        _refused(["import", str(tmp_path / "src.npy"), str(fs / "o.npy")], capsys, fs, "DST", "needs", "available")
        # ENOSPC for real in the middle: the room is taken by another writer after the first chunk
        half = src[: 1 << 10]  # 4 MiB: passes the check
        with pytest.raises(OSError) as ei:
            convert(half, f32, str(fs / "o.npy"), chunk_bytes=1 << 20, progress=lambda n: fill(fs))
        assert ei.value.errno == 28
        assert listing(fs) == ["filler"]
        os.unlink(fs / "filler")
        # Ctrl-C in the middle: nothing either, and an old destination stays as it was
        convert(src[:8], f32, str(fs / "o.npy"))
        old = (fs / "o.npy").read_bytes()

        def interrupt(n):
            raise KeyboardInterrupt
        with pytest.raises(KeyboardInterrupt):
            convert(half, f32, str(fs / "o.npy"), overwrite=True, chunk_bytes=1 << 20, progress=interrupt)
        assert listing(fs) == ["o.npy"] and (fs / "o.npy").read_bytes() == old


def test_import_failing_with_efbig_is_one_line_exit_1_and_leaves_nothing(tmp_path):
    np.save(tmp_path / "src.npy", np.ones((256, 1024), np.float32))  # 1 MiB
    r = _run("import", "src.npy", "o.npy", cwd=tmp_path, preexec_fn=file_size_limit(512 << 10))
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "File too large" in r.stderr and "Traceback" not in r.stderr
    assert listing(tmp_path) == ["src.npy"]


# -- resources checked first -----------------------------------------------------------------------------
def test_bench_size_larger_than_the_free_space_is_refused_first(cwd, capsys):
    from gpuio.outputs import free_bytes
    big = f"{free_bytes(cwd) // (1 << 20) + 1024}M"
    _refused(["bench", "--size", big], capsys, cwd, f"--size '{big}'", "needs", "available")


@pytest.mark.parametrize("argv,option,limit", [
    (["bench", "--size", "4M", "--workload", "seq 1MiB read"], "--size '4M'", "needs at least 34603008 bytes"),
    (["bench", "--workers", "100000"], "--workers 100000", "[1, 64]"),
    (["bench", "--engine-qd", "100000"], "--engine-qd 100000", "[1, 4096]"),
    (["import", "a.npy", "o.npy", "--block-size", str(2**40)], f"--block-size {2**40}", "power of two"),
    (["sim", "synth", "--requests", str(10**13)], f"--requests {10**13}", "[1, 268435456]"),
    (["cluster", "up", "--osds", "100000"], "--osds 100000", "[1, 16]"),
])
def test_limits_are_refused_before_any_work(cwd, capsys, argv, option, limit):
    np.save(cwd / "a.npy", np.zeros((2, 2), np.float32))
    err = _refused(argv, capsys, cwd, option, limit)
    assert "workers=" not in err and "queue_depth=" not in err and "block_size=" not in err


def test_sim_synth_limit_comes_from_the_simulator():
    from gpuio import sim
    lim = sim.limits()
    assert lim["workload_requests_max"] == 1 << 28 and lim["request_bytes"] >= 24
    with pytest.raises(ValueError, match="requests=.* must lie in"):
        sim.synthesize("znand", lim["workload_requests_max"] + 1)


def test_npy_header_cut_mid_dict_is_one_line(cwd, capsys):
    np.save(cwd / "a.npy", np.zeros((4, 4), np.float32))
    raw = (cwd / "a.npy").read_bytes()
    hlen = int.from_bytes(raw[8:10], "little")
    head = raw[10:10 + hlen]
    cut = head[:head.index(b"False") + 6]
    (cwd / "cut.npy").write_bytes(raw[:10] + cut + b" " * (hlen - 1 - len(cut)) + b"\n" + raw[10 + hlen:])
    _refused(["import", "cut.npy", "o.npy"], capsys, cwd, "SRC 'cut.npy'", "not a valid .npy header")


def test_cluster_up_refuses_a_folder_of_other_files(cwd, capsys):
    (cwd / "ceph.conf").write_text("mine\n")
    _refused(["cluster", "up", "--dir", str(cwd)], capsys, cwd, "--dir", "no cluster.json")
    assert (cwd / "ceph.conf").read_text() == "mine\n"


# -- the smaller items -----------------------------------------------------------------------------------
def test_sim_replay_reads_disksim_milliseconds(cwd, capsys):
    (cwd / "ms.trace").write_text("0.000000 0 100 8 1\n0.500000 1 200 16 0\n1.250 0 300 8 1\n")
    (cwd / "ns.trace").write_text("0 0 100 8 1\n500000 1 200 16 0\n1250000 0 300 8 1\n")
    from gpuio import sim
    a, b = sim.replay(cwd / "ms.trace").stats, sim.replay(cwd / "ns.trace").stats
    assert a == b and a["requests"] == 3 and a["reads"] == 2
    assert sim.replay(sim.load_trace(cwd / "ns.trace", "disksim-ms")).stats["last_completion_ns"] > 10**9
    rc, out, err = _gpuio(["sim", "replay", "ms.trace"], capsys)
    assert rc == 0 and "requests 3" in out, err
    _refused(["sim", "replay", "ms.trace", "--format", "disksim-ns"], capsys, cwd, "ms.trace:1", "time_ns")


def test_help_shows_no_type_beside_flags(capsys):
    from typer.main import get_command

    from gpuio_apps.cli import _register, app
    _register()
    seen = 0
    stack = [(get_command(app), [])]
    while stack:
        cmd, path = stack.pop()
        if hasattr(cmd, "commands"):  # a group
            stack += [(c, path + [n]) for n, c in cmd.commands.items()]
            continue
        rc, out, err = _gpuio(path + ["--help"], capsys)
        assert rc == 0 and "--help" in out, err
        assert "<bool>" not in out, f"gpuio {' '.join(path)} --help:\n{out}"
        seen += 1
    rc, out, _ = _gpuio(["demo", "--hetero", "--help"], capsys)
    assert rc == 0 and "--deterministic" in out and "<bool>" not in out
    assert seen >= 15


@pytest.mark.slow
def test_bench_ceiling_fits_100_columns_unless_verbose(cwd, capsys):
    rc, out, err = _gpuio(["bench", "ceiling", "--quick"], capsys)
    assert rc == 0, err
    assert max(map(len, out.splitlines())) <= 100, out
    assert "JUDGED" in out and "M IOPS" in out and "| kind |" not in out
    # the second run replaces the JSON the first one wrote, without --force; a file gpuio did not write is refused
    rc, out, err = _gpuio(["bench", "ceiling", "--quick", "--verbose"], capsys)
    assert rc == 0 and "| kind |" in out and max(map(len, out.splitlines())) > 100, err
    (cwd / "gpuio-ceiling.json").write_text('{"mine": 1}')
    _refused(["bench", "ceiling", "--quick"], capsys, cwd, "--json", "not written by gpuio")


def test_bench_apps_fits_100_columns_unless_verbose(cwd, capsys):
    argv = ["bench", "apps", "--workload", "vecadd"]
    rc, out, err = _gpuio(argv, capsys)
    assert rc == 0, err
    assert max(map(len, out.splitlines())) <= 100, out
    assert "vecadd" in out and "io-diag" not in out and "--verbose" in out
    rc, out, err = _gpuio(argv + ["--verbose"], capsys)  # its own JSON from the first run is replaced
    assert rc == 0 and "io-diag" in out, err
    (cwd / "gpuio-apps-bench.json").write_text('{"mine": 1}')
    _refused(argv, capsys, cwd, "--json", "not written by gpuio")


def test_feature_store_says_what_it_takes():
    import torch

    import gpuio
    from gpuio.rows import InMemoryRows
    with pytest.raises(TypeError, match=r"row table.*got a torch\.Tensor.*InMemoryRows"):
        gpuio.TableCache(torch.zeros(10, 4))
    fs = gpuio.TableCache(InMemoryRows(torch.zeros(10, 4)), gpu_cache_bytes=1 << 16, device="cpu")
    assert repr(fs).startswith("gpuio.TableCache(gpuio.rows.InMemoryRows(shape=(10, 4)") and "cache=" in repr(fs)


def test_stream_store_repr(tmp_path):
    from gpuio.streams import StreamStore
    with StreamStore(str(tmp_path / "s.bin"), mode="c", create_bytes=32 << 20) as st:
        sd = st.create_stream()
        st.write_stream(sd, b"x")
        st.close_stream(sd)
        assert "streams=1" in repr(st) and "s.bin" in repr(st) and "free_blocks=" in repr(st)
    assert repr(st).endswith("closed)")


def test_volume_errors_name_the_missing_conf(cwd, capsys, monkeypatch):
    monkeypatch.delenv("CEPH_ARGS", raising=False)
    monkeypatch.setenv("CEPH_CONF", str(cwd / "nowhere.conf"))
    _refused(["volume", "list"], capsys, cwd, "nowhere.conf", "does not exist")
    _refused(["volume", "info", "rbd/x", "--conf", "missing.conf"], capsys, cwd, "--conf 'missing.conf'")
    _refused(["volume", "create", "rbd/x", "12Q", "--conf", "missing.conf"], capsys, cwd, "SIZE '12Q'")
    (cwd / "notes.txt").write_text("mine\n")  # a keyring is written only over a keyring of that user
    _refused(["volume", "grant", "rbd/x", "bob", "-o", "notes.txt"], capsys, cwd, "--out 'notes.txt'", "--force")
    (cwd / "k").write_text("[client.bob]\n\tkey = old\n")
    _refused(["volume", "grant", "rbd/x", "bob", "-o", "k"], capsys, cwd, "--conf not given")  # k passed
    assert (cwd / "notes.txt").read_text() == "mine\n"


def test_readme_pip_extras_are_quoted():
    text = (ROOT / "README.md").read_text()
    assert "pip install gpuio[" not in text and "pip install 'gpuio[torch]'" in text
    assert text.count("## PyTorch Geometric") == 0 and text.count("## PyG") == 1
    assert 'volumes.open("rbd/feat", "r+", who=who)' in text
