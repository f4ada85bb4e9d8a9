"""Engine options come from C++ and are range-checked there once: the same text from
C++ and Python, ValueError/TypeError naming the option, never std::bad_cast."""
import inspect

import numpy as np
import pytest

import gpuio
from gpuio import _core
from gpuio.engine import DEFAULTS, check_option


@pytest.fixture
def dev(tmp_path):
    p = str(tmp_path / "dev.bin")
    gpuio.Engine.create_file(p, 1 << 20)
    return p


@pytest.mark.parametrize("kw, exc, text", [
    (dict(queue_depth=-1), ValueError, "queue_depth=-1 must lie in [1, 4096]"),
    (dict(queue_depth=0), ValueError, "queue_depth=0 must lie in [1, 4096]"),
    (dict(queue_depth=2 ** 70), ValueError, "queue_depth="),
    (dict(queue_depth=1.5), TypeError, "queue_depth must be an int, got float 1.5"),
    (dict(queue_depth=True), TypeError, "queue_depth must be an int, got bool"),
    (dict(workers=-2), ValueError, "workers=-2 must lie in [0, 64]"),
    (dict(block_size=3000), ValueError, "block_size=3000 must be a power of two in [512, 1048576]"),
    (dict(stripe_bytes=-1), ValueError, "stripe_bytes=-1 must lie in"),
    (dict(io_timeout_ms=0), ValueError, "io_timeout_ms=0 must lie in [1, 4294967295]"),
    (dict(staging_bytes=1 << 40), ValueError, "staging_bytes=1099511627776 must lie in"),
    (dict(io_bytes_max=512), ValueError, "io_bytes_max=512 is smaller than block_size=4096"),
    (dict(direct="yes"), TypeError, "direct must be a bool, got str 'yes'"),
    (dict(backend=3), TypeError, "backend must be a str"),
    (dict(sim=5), TypeError, "sim must be a dict or None"),
    (dict(backend="fault:uring", fault=dict(seed=-1)), ValueError, "seed=-1 must lie in"),
    (dict(backend="fault:uring", fault=dict(eio_rate="x")), TypeError, "eio_rate must be a number"),
    (dict(fault=dict(seed=1)), ValueError, "use backend='fault:uring'"),
])
def test_bad_option_is_named(dev, kw, exc, text):
    with pytest.raises(exc) as e:
        gpuio.Engine(dev, **kw)
    assert text in str(e.value)


def test_unknown_option_is_a_type_error(dev):
    with pytest.raises(TypeError, match="queue_dept"):
        gpuio.Engine(dev, queue_dept=4)


def test_check_option_is_the_engine_check():
    # One range table in C++: TensorFile and others call it rather than restating it.
    with pytest.raises(ValueError, match=r"block_size=3000 must be a power of two in \[512, 1048576\]"):
        check_option("block_size", 3000)
    with pytest.raises(ValueError, match="unknown engine option 'nope'"):
        check_option("nope", 1)
    with pytest.raises(ValueError, match=r"block_size=100 must be a power of two"):
        gpuio.TensorFile.create("/nonexistent/never-written.npy", (4, 4), block_size=100)
    check_option("queue_depth", 4096)


def test_defaults_are_read_from_cpp():
    d = _core.engine_defaults()
    assert d == DEFAULTS
    sig = inspect.signature(gpuio.Engine.__init__)
    knobs = [n for n in sig.parameters if n not in ("self", "paths")]
    assert set(knobs) == set(d), "every C++ knob is an Engine keyword, by the same name"
    for n in knobs:
        assert sig.parameters[n].default == d[n], n
        assert n in gpuio.Engine.__doc__, f"help(gpuio.Engine) documents {n}"
    assert d["block_size"] == 4096 and d["queue_depth"] == 128
    assert {r["name"] for r in _core.knob_tables()["engine"] if r["min"] is not None} <= set(d)


def test_gpu_defaults_are_read_from_cpp():
    """gpuio.gpu.DEFAULTS holds C++'s GpuOptions defaults (any build: the struct needs no CUDA) plus the two
    options the Python layer owns; every one is documented on Engine.attach_gpu."""
    from gpuio import gpu

    cpp = _core.gpu_defaults()
    assert {k: v for k, v in gpu.DEFAULTS.items() if k in cpp and k != "stream_wait"} == \
        {k: v for k, v in cpp.items() if k != "stream_wait"}
    assert set(gpu.DEFAULTS) - set(cpp) == {"wait_timeout_s"}
    assert cpp["stream_wait"] == "kernel" and gpu.DEFAULTS["stream_wait"] == "auto"
    assert cpp["queues"] == 8 and cpp["bounce_bytes"] == 64 << 20
    for name in gpu.DEFAULTS:
        assert name in gpuio.Engine.attach_gpu.__doc__, name


def test_defaults_work_and_values_reach_cpp(dev):
    with gpuio.Engine(dev, queue_depth=8, block_size=8192, workers=None) as e:
        assert e.block_size == 8192 and e.total_blocks == (1 << 20) // 8192
        out = np.empty(8192, np.uint8)
        e.read([0], out)
