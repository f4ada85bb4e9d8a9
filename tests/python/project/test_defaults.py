"""gpuio.defaults is the one table of gpuio's knobs: C++ knobs read from C++ (defaults, ranges, docs), the rest
declared once; every signature, view and CLI option agrees with it; every documented variable is honoured by
what it configures; a bad value, set or in the environment, is refused in one line naming knob and variable."""
from __future__ import annotations

import ast
import inspect
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

import gpuio
from gpuio import _core, defaults
from gpuio import engine as engine_mod

PKG = pathlib.Path(gpuio.__file__).resolve().parent


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    for k in defaults.knobs():
        if k.env:
            monkeypatch.delenv(k.env, raising=False)
    defaults.reset()
    yield
    defaults.reset()


def test_one_table_every_defaults_name_is_a_view():
    """No module declares defaults of its own: a module-level DEFAULTS is gpuio.defaults.defaults_of(owner)."""
    for path in PKG.rglob("*.py"):
        if path.name == "defaults.py" and path.parent == PKG:
            continue
        for node in ast.parse(path.read_text()).body:
            targets = [t.id for t in getattr(node, "targets", [getattr(node, "target", None)]) if
                       isinstance(t, ast.Name)]
            if "DEFAULTS" in targets:
                call = node.value
                func = getattr(call, "func", None)
                assert "defaults_of" in (getattr(func, "id", ""), getattr(func, "attr", "")), \
                    f"{path.relative_to(PKG)}:{node.lineno} declares DEFAULTS of its own"


def test_cpp_tables_are_read_whole():
    tables = _core.knob_tables()
    for owner, rows in tables.items():
        assert rows, owner
        for r in rows:
            name = r["name"] if owner == "engine" else f"{owner}.{r['name']}"
            k = defaults.knob(name)
            if k.source == "C++":  # (gpu.stream_wait: Python owns its default, "auto", and says so)
                assert k.doc == r["doc"], name
                assert (k.default, k.min, k.max, k.choices) == (r["default"], r["min"], r["max"], tuple(r["choices"]))
    assert {k.key: k.default for k in defaults.knobs("engine")} == _core.engine_defaults()
    assert {k.key: k.default for k in defaults.knobs("gpu") if k.key in _core.gpu_defaults()} == \
        dict(_core.gpu_defaults(), stream_wait="auto")  # the one C++ knob whose default Python owns
    assert defaults.defaults_of("table") == _core.table_defaults()
    assert {k: v for k, v in defaults.defaults_of("array").items() if k != "page_bytes"} == _core.array_defaults()
    counts = {o: len(defaults.knobs(o)) for o in defaults.OWNERS}
    assert all(counts.values()), counts
    names = [k.name for k in defaults.knobs()]
    assert len(names) == len(set(names))
    for k in defaults.knobs():
        assert k.doc.strip(), k.name
        assert k.env is None or k.env_only or k.env == "GPUIO_" + k.name.replace(".", "_").upper(), k.name


def test_the_librarys_table_holds_the_librarys_knobs_and_the_apps_have_their_own():
    """No knob of gpuio.defaults belongs to an application (gpuio_apps) or a test; the applications' knobs are
    gpuio_apps.knobs' rows, in the same row format."""
    from gpuio_apps import knobs as app_knobs

    assert not [o for o, what in defaults.OWNERS.items() if "gpuio_apps" in what or "faults" in what]
    assert not set(defaults.OWNERS) & set(app_knobs.OWNERS)
    assert {k.owner for k in app_knobs.knobs()} == set(app_knobs.OWNERS) == {"cluster"}
    lib_row, app_row = defaults.listing("engine")[0], app_knobs.listing("cluster")[0]
    assert set(lib_row) == set(app_row) and app_row["owned_by"] == "gpuio_apps"
    with pytest.raises(ValueError, match="unknown knob 'cluster.osds'"):
        defaults.knob("cluster.osds")


def test_every_engine_keyword_is_in_the_table_with_cpps_default():
    sig = inspect.signature(gpuio.Engine.__init__)
    keywords = [n for n in sig.parameters if n not in ("self", "paths")]
    cpp = _core.engine_defaults()
    assert set(keywords) == set(cpp) == {k.key for k in defaults.knobs("engine")}
    for n in keywords:
        assert sig.parameters[n].default == cpp[n] == defaults.knob(n).default, n
        assert f"{n}: " in gpuio.Engine.__doc__, f"help(gpuio.Engine) documents {n} (from the table)"
    for n in defaults.defaults_of("gpu"):
        assert f"{n}: " in gpuio.Engine.attach_gpu.__doc__, n


def _signature_defaults(fn) -> dict:
    return {n: p.default for n, p in inspect.signature(fn).parameters.items() if p.default is not p.empty}


def test_signatures_take_their_defaults_from_the_table():
    from gpuio.cache import TableCache
    from gpuio.device_array import DeviceArray
    from gpuio.streams import StreamStore
    from gpuio.tensor import TensorFile
    from gpuio.volumes import api, tensors
    from gpuio_apps import cluster

    def agree(fn, owner, skip=()):
        table = defaults.defaults_of(owner)
        got = {k: v for k, v in _signature_defaults(fn).items() if k in table and k not in skip}
        assert got and got == {k: table[k] for k in got}, (fn.__qualname__, got)

    agree(StreamStore.__init__, "streams")
    assert set(_signature_defaults(StreamStore.__init__)) == set(defaults.defaults_of("streams"))
    agree(TableCache.__init__, "cache")
    agree(DeviceArray.__init__, "array")
    agree(DeviceArray.open, "array")
    from gpuio_apps import knobs as app_knobs
    table = app_knobs.defaults_of("cluster")
    got = {k: v for k, v in _signature_defaults(cluster.up).items() if k in table}
    assert got and got == {k: table[k] for k in got}, got
    none_is_the_table = ("pool", "namespace")  # None: the table's value, looked up when called
    agree(api.create, "volumes", none_is_the_table)
    agree(api.map, "volumes", none_is_the_table)
    agree(tensors.open_tensor, "volumes", none_is_the_table)
    for fn in (TensorFile.create, TensorFile.open, DeviceArray.create, DeviceArray.open, engine_mod.Engine.open_target):
        agree(fn, "engine")
    agree(engine_mod.open_files, "engine", ("direct",))  # direct=None: O_DIRECT where the file system takes it
    from gpuio.cache.page_cache import POLICIES
    from gpuio.streams.store import MODES
    assert POLICIES == defaults.knob("cache.policy").choices
    assert set(MODES) == set(defaults.knob("streams.mode").choices)


def _other_value(k):
    """A valid value of knob k that differs from its default (a knob of one choice: that one, still set through
    its variable)."""
    if k.type == "bool":
        return not k.default
    if k.choices:
        return next((c for c in k.choices if c != k.default), k.default)
    if k.type == "str":
        return "posix" if k.name == "backend" else k.default + "x"
    if k.type == "float":
        return k.default * 2
    lo = -(1 << 62) if k.min is None else k.min
    hi = 1 << 62 if k.max is None else k.max
    return next(v for v in (k.default * 2, k.default + 1, lo, 1) if v != k.default and lo <= v <= hi)


def _safetensors_stats(tmp_path) -> dict:
    """The plan reader calls, plan size (MiB), ring, disk pieces, copy streams and data path (pipeline) a load was
    given, and
    the huge_slots setting a save was given (the saves' knob)."""
    import gpuio.safetensors as gst

    path = tmp_path / "m.safetensors"
    saved: dict = {}
    gst.save_file({f"t{i}": torch.full((1 << 18,), float(i)) for i in range(40)}, path, stats=saved)
    stats: dict = {}
    got = gst.load_file(path, stats=stats)
    assert all(torch.equal(got[f"t{i}"], torch.full((1 << 18,), float(i))) for i in range(40))
    return dict(threads=stats["threads_max"], chunk_mib=stats["chunk_bytes"] >> 20, huge_slots=saved["huge_slots"],
                ring_kib=stats["ring_kib"], pipeline=stats["pipeline"], copy_streams=stats["copy_streams"],
                direct_kib=stats["direct_kib"], direct_pieces=stats["direct_pieces"])


def test_every_variable_is_honoured_by_what_it_configures(monkeypatch, tmp_path):
    settable = [k for k in defaults.knobs() if k.env and not k.env_only]
    assert {k.owner for k in settable} == {"engine", "gpu", "safetensors"}
    assert {k.key for k in settable if k.owner == "engine"} == \
        {k.key for k in defaults.knobs("engine") if not k.per_target and k.type != "dict"}
    def set_env(owners):
        for k in settable:
            if k.owner in owners:
                v = _other_value(k)
                monkeypatch.setenv(k.env, str(int(v)) if isinstance(v, bool) else str(v))

    set_env({"safetensors"})
    st = _safetensors_stats(tmp_path)  # what the loader and a save were given (a save writes through the process
    set_env({"engine", "gpu"})         # engine: before the engine's knobs change)
    opts = engine_mod.process_engine_options()  # what the process engine is made with
    gpu = defaults.values("gpu")                # what a GPU path made without options is given
    for k in settable:
        got = {"engine": opts, "gpu": gpu, "safetensors": st}[k.owner][k.key]
        assert got == _other_value(k) or (k.key == "workers" and got is None), (k.env, got)
        assert defaults.source(k.name) == k.env


@pytest.mark.parametrize("stale", ["python", "auto"])
def test_a_stale_pipeline_setting_fails_naming_it(monkeypatch, tmp_path, stale):
    """safetensors.pipeline has one choice, cpp (the plan reader): the Python readers' python, and auto, fail in
    one line naming the value and the knob, set() at once, the variable when a load reads it."""
    import gpuio.safetensors as gst

    with pytest.raises(ValueError) as e:
        defaults.set("safetensors.pipeline", stale)
    assert str(e.value) == f"safetensors.pipeline={stale!r} is not one of cpp", e.value
    path = tmp_path / "m.safetensors"
    gst.save_file({"w": torch.ones(3)}, path)
    monkeypatch.setenv("GPUIO_SAFETENSORS_PIPELINE", stale)
    with pytest.raises(ValueError) as e:
        gst.load_file(path)
    text = str(e.value)
    assert text.startswith(f"GPUIO_SAFETENSORS_PIPELINE={stale!r}: ") and "safetensors.pipeline" in text, text
    assert "\n" not in text, text
    monkeypatch.setenv("GPUIO_SAFETENSORS_PIPELINE", "cpp")
    assert torch.equal(gst.load_file(path)["w"], torch.ones(3))


def test_variables_without_keywords_are_read_where_they_act(monkeypatch):
    """Each is read by its own code (C++ or gpuio.gpu), named there; GPUIO_SIM reaches a sim backend."""
    root = PKG.parents[1]
    sources = [p.read_text() for p in (root / "cpp").rglob("*.[ch]pp")] + \
        [p.read_text() for p in PKG.rglob("*.py") if p.name != "defaults.py"]
    only = defaults.knobs("environment")
    assert only and all(k.env_only for k in only)
    for k in only:
        assert any(f'"{k.env}"' in text or k.name in text for text in sources), k.env
        monkeypatch.setenv(k.env, "x")
        assert defaults.get(k.name) == "x" and defaults.source(k.name) == k.env
        with pytest.raises(ValueError, match=f"set {k.env} in the environment"):
            defaults.set(k.name, "y")
    monkeypatch.setenv("GPUIO_SIM", "preset=tlc")
    with gpuio.Engine(["sim0"], backend="sim", sim=dict(device_bytes=1 << 20)) as e:
        assert "env=GPUIO_SIM" in e.stats()["backend"] and "tlc" in e.stats()["backend"]


def test_the_process_engine_is_made_from_the_variables(tmp_path):
    code = ("import gpuio; e = gpuio.default_engine(); s = e.stats(); "
            "print(s['workers'], e._core.block_size, gpuio.defaults.source('workers'))")
    env = dict(os.environ, GPUIO_WORKERS="3", GPUIO_BLOCK_SIZE="8192",
               PYTHONPATH=":".join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["3", "8192", "GPUIO_WORKERS"]


@pytest.mark.parametrize("name, env, raw, text", [
    ("queue_depth", "GPUIO_QUEUE_DEPTH", "0", "queue_depth=0 must lie in [1, 4096]"),
    ("queue_depth", "GPUIO_QUEUE_DEPTH", "deep", "queue_depth expects an integer"),
    ("block_size", "GPUIO_BLOCK_SIZE", "3000", "block_size=3000 must be a power of two in [512, 1048576]"),
    ("sqpoll", "GPUIO_SQPOLL", "maybe", "sqpoll expects 1/0"),
    ("low_latency", "GPUIO_LOW_LATENCY", "fast", "low_latency='fast' is not one of auto, on, off"),
    ("gpu.copy", "GPUIO_GPU_COPY", "fast", "copy='fast' is not one of auto, batch, kernel, percopy"),
    ("gpu.stream_wait", "GPUIO_GPU_STREAM_WAIT", "hostfn", "gpu.stream_wait='hostfn' is not one of"),
    ("gpu.wait_timeout_s", "GPUIO_GPU_WAIT_TIMEOUT_S", "0", "gpu.wait_timeout_s=0.0 must be >= 0.001"),
])
def test_a_bad_variable_is_one_line_naming_knob_and_variable(monkeypatch, name, env, raw, text):
    monkeypatch.setenv(env, raw)
    with pytest.raises(ValueError) as e:
        defaults.get(name)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{env}={raw!r}") and text in msg, msg
    if defaults.knob(name).owner == "engine":
        with pytest.raises(ValueError, match=env):
            engine_mod.process_engine_options()


@pytest.mark.parametrize("name, value, exc, text", [
    ("queue_depth", 0, ValueError, "queue_depth=0 must lie in [1, 4096]"),
    ("queue_depth", 1.5, TypeError, "queue_depth must be an int, got float 1.5"),
    ("sqpoll", "yes", TypeError, "sqpoll must be a bool"),
    ("workers", 65, ValueError, "workers=65 must lie in [0, 64]"),
    ("gpu.bounce_bytes", 4096, ValueError, "bounce_bytes=4096 must lie in [1048576, "),
    ("gpu.stream_wait", "fast", ValueError, "gpu.stream_wait='fast' is not one of auto, kernel, wait_value"),
    ("queue_dpth", 4, ValueError, "unknown knob 'queue_dpth'; did you mean queue_depth"),
    ("direct", False, ValueError, "direct is not a process-wide setting"),
    ("streams.sblock_bytes", 1 << 20, ValueError, "a keyword of gpuio.streams.StreamStore(...)"),
])
def test_set_refuses_a_bad_value_in_one_line(name, value, exc, text):
    before = defaults.get("queue_depth")
    with pytest.raises(exc) as e:
        defaults.set({"queue_depth": 64, name: value})
    assert text in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert defaults.get("queue_depth") == before, "nothing changes when one value is refused"


def test_set_get_and_the_context_manager(monkeypatch):
    monkeypatch.setenv("GPUIO_QUEUE_DEPTH", "32")
    assert defaults.get("queue_depth") == 32 and defaults.source("queue_depth") == "GPUIO_QUEUE_DEPTH"
    with defaults.set("queue_depth", 64):
        assert defaults.get("queue_depth") == 64 and defaults.source("queue_depth") == "set"
        with defaults.set({"gpu.bounce_bytes": 128 << 20}, io_timeout_ms=5000):
            assert defaults.values("gpu", ["bounce_bytes"]) == {"bounce_bytes": 128 << 20}
            assert engine_mod.process_engine_options()["io_timeout_ms"] == 5000
        assert defaults.get("io_timeout_ms") == defaults.knob("io_timeout_ms").default
        assert defaults.get("gpu.bounce_bytes") == 64 << 20
    assert defaults.get("queue_depth") == 32
    defaults.set(workers=2)
    assert defaults.get("workers") == 2
    defaults.reset("workers")
    assert defaults.get("workers") == 0 and defaults.source("workers") == "default"


def test_set_says_when_the_running_process_engine_keeps_its_values():
    import warnings

    eng = gpuio.default_engine()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        defaults.set("queue_depth", eng._options["queue_depth"])  # the same value: nothing to say
        defaults.set({"gpu.queues": 4})                           # not an engine knob
    with pytest.warns(RuntimeWarning, match=r"process engine is already running with \{'queue_depth': "):
        defaults.set("queue_depth", eng._options["queue_depth"] + 1)


@pytest.mark.filterwarnings("ignore:gpuio.defaults.set")  # the process engine may be running: it keeps its own
def test_open_files_own_engine_starts_from_the_settings(tmp_path):
    p = tmp_path / "f.bin"
    gpuio.Engine.create_file(str(p), 1 << 20)
    with defaults.set(io_timeout_ms=4321):
        t = engine_mod.open_files(str(p), queue_depth=16)  # engine-wide option: an engine of its own
    try:
        assert t.owns_engine and t.engine._options["io_timeout_ms"] == 4321
        assert t.engine._options["queue_depth"] == 16
    finally:
        t.close()


def test_cli_knob_options_default_from_the_table():
    """Every CLI option named like an engine knob takes the table's default, or states its own with a reason."""
    import typer.main

    from gpuio_apps.cli import _knobs, _register, app

    _register()
    engine_keys = {k.key for k in defaults.knobs("engine")}
    seen = set()

    def walk(cmd, path):
        for sub_name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, path + (sub_name,))
        for p in getattr(cmd, "params", []):
            if p.name in engine_keys:
                seen.add((path, p.name))
                own = _knobs.OWN_DEFAULTS.get((path[0], p.name)) or _knobs.NOT_KNOBS.get((" ".join(path), p.name))
                if own is None:
                    knob = "volumes.block_size" if path[0] == "volume" else p.name
                    assert p.default == defaults.knob(knob).default, (path, p.name, p.default)
                elif (path[0], p.name) in _knobs.OWN_DEFAULTS:
                    assert p.default == own[0]

    walk(typer.main.get_command(app), ())
    assert (("import",), "block_size") in seen and (("bench",), "workers") in seen


def test_gpuio_defaults_lists_every_knob(capsys):
    from gpuio_apps.cli import main

    with pytest.raises(SystemExit) as e:
        main(["defaults", "--json"])
    assert e.value.code == 0
    rows = json.loads(capsys.readouterr().out)
    from gpuio_apps import knobs as app_knobs

    assert [r["name"] for r in rows] == [k.name for k in defaults.knobs()] + [k.name for k in app_knobs.knobs()]
    with pytest.raises(SystemExit) as e:
        main(["defaults", "--owner", "engine"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "  workers = 0" in out and "GPUIO_WORKERS" in out
    with pytest.raises(SystemExit) as e:
        main(["defaults", "--owner", "nope"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.splitlines()) == 1 and "--owner" in err


@pytest.mark.gpu
def test_a_gpu_path_made_without_options_takes_the_gpu_variables(tmp_path):
    """GPU machine: GPUIO_GPU_<NAME> reaches the GPU path a process's engine makes on its own (engine.gpu)."""
    from gpu_util import why_no_gpu

    reason = why_no_gpu()
    if reason:
        pytest.skip(f"no GPU path: {reason}")
    code = ("import gpuio; e = gpuio.default_engine(); o = e.gpu.options; "
            "print(o['queues'], o['wait_timeout_s'], o['bounce_bytes'], o['stream_copy'])")
    env = dict(os.environ, GPUIO_GPU_QUEUES="4", GPUIO_GPU_WAIT_TIMEOUT_S="30",
               GPUIO_GPU_BOUNCE_BYTES=str(32 << 20), GPUIO_GPU_STREAM_COPY="kernel",
               PYTHONPATH=":".join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["4", "30.0", str(32 << 20), "kernel"]
