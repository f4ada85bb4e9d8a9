"""gpuio.Future, the one future type: its contract (done/wait/result/exception, bounded waits, the result made
once, an error raised as the same exception every time), every asynchronous call of the library returning it,
the old names as deprecated aliases, and the row-source protocols the cache, loaders and PyG store name."""
from __future__ import annotations

import errno
import threading

import numpy as np
import pytest
import torch

import gpuio
from gpuio import aligned_empty
from gpuio.future import Future, Polled
from gpuio.rows import (InMemoryRows, OnDevice, PagedRows, RowSource, Rows, SupportsLookahead, SupportsPrefetch,
                        SupportsScatter, SupportsStats, missing)
from gpuio_apps.baselines import MemmapRows, ZeroRows

BS = 4096


class Gate:
    """Work the test completes by hand: open() finishes it, fail(e) makes it fail. block() waits on a real
    threading.Event, so a waiter in another thread is released when the test opens the gate."""

    def __init__(self):
        self.event, self.error, self.blocks = threading.Event(), None, []

    def open(self):
        self.event.set()

    def fail(self, error):
        self.error = error
        self.event.set()

    def poll(self):
        return self.event.is_set()

    def block(self, timeout):
        self.blocks.append(timeout)
        if not self.event.wait(5.0 if timeout is None else timeout):
            raise OSError(errno.ETIMEDOUT, f"gate not open after {timeout} s")
        if self.error is not None:
            raise self.error


def test_wait_returns_the_same_result_every_time_and_a_timeout_leaves_it_pending():
    gate, made = Gate(), []
    f = Future(gate, finish=lambda: made.append(object()) or made[-1])
    assert not f.done() and repr(f) == "<gpuio.Future pending>"
    with pytest.raises(TimeoutError) as ei:  # OSError(ETIMEDOUT) is TimeoutError
        f.wait(0.01)
    assert ei.value.errno == errno.ETIMEDOUT and "gate not open" in str(ei.value)
    assert not f.done()  # a wait that ran out settles nothing
    gate.open()
    assert f.done()
    first = f.wait()
    assert f.wait() is first and f.result() is first and f.result(0) is first
    assert f.exception() is None and len(made) == 1 and f.work is None  # made once; the work let go
    assert gate.blocks == [0.01, None]  # None goes to the work: its own bound, not an infinite wait


def test_an_error_is_settled_once_and_raised_as_the_same_exception():
    gate = Gate()
    f = Future(gate, result="never")
    gate.fail(OSError(errno.EIO, "block 7 failed"))
    assert f.done()  # failed counts as done, and done() never raises
    with pytest.raises(OSError) as first:
        f.wait()
    with pytest.raises(OSError) as again:
        f.result(1.0)
    assert again.value is first.value and f.exception() is first.value
    assert gate.blocks == [None]  # the work was waited on once
    assert repr(f) == "<gpuio.Future failed: OSError>"


def test_an_interrupted_wait_is_not_the_calls_error():
    class Interrupted(Gate):
        def block(self, timeout):
            if not self.blocks:
                self.blocks.append(timeout)
                raise KeyboardInterrupt  # Ctrl-C in the waiting thread, the work itself fine
            super().block(timeout)

    work = Interrupted()
    work.open()
    f = Future(work, result=7)
    with pytest.raises(KeyboardInterrupt):
        f.wait()
    assert f.wait() == 7 and f.exception() is None


def test_a_failing_finish_is_the_futures_error():
    def finish():
        raise ValueError("cut failed")

    gate = Gate()
    gate.open()
    f = Future(gate, finish=finish)
    for _ in range(2):
        with pytest.raises(ValueError, match="cut failed"):
            f.wait()
    assert f.done() and isinstance(f.exception(), ValueError)


def test_concurrent_waiters_get_one_result():
    gate, calls = Gate(), []
    f = Future(gate, finish=lambda: calls.append(1) or torch.arange(3))
    got, threads = [], [threading.Thread(target=lambda: got.append(f.wait())) for _ in range(8)]
    for t in threads:
        t.start()
    gate.open()
    for t in threads:
        t.join(10)
    assert len(got) == 8 and all(g is got[0] for g in got) and calls == [1]


def test_bad_timeouts_are_refused_naming_the_value():
    f = Future(Gate())
    for bad in (-1, float("nan"), "1"):
        with pytest.raises(ValueError, match=f"timeout must be None or a number of seconds >= 0, got {bad!r}"):
            f.wait(bad)
    with pytest.raises(TypeError, match="error must be an exception, got str"):
        Future.failed("boom")


def test_completed_failed_and_all_of():
    assert Future.completed(5).wait() == 5 and Future.completed().done()
    err = KeyError("k")
    bad = Future.failed(err)
    assert bad.done() and bad.exception() is err
    gates = [Gate(), Gate()]
    both = Future.all_of([Future(g, i) for i, g in enumerate(gates)])
    gates[0].open()
    assert not both.done()
    with pytest.raises(TimeoutError):
        both.wait(0.01)
    gates[1].open()
    assert both.wait() == [0, 1]
    with pytest.raises(KeyError):
        Future.all_of([Future.completed(1), bad]).wait()
    with pytest.raises(TypeError, match=r"futures\[1\] must be a gpuio.Future, got int"):
        Future.all_of([bad, 3])


def test_polled_work_is_bounded():
    f = Future(Polled(lambda: False, lambda: None, 0.05, "a thing that never ends"))
    with pytest.raises(TimeoutError, match="a thing that never ends not complete after 0.05 s"):
        f.wait()  # the work's own bound, without a timeout from the caller
    with pytest.raises(ValueError, match="bound_s"):
        Polled(lambda: True, lambda: None, float("inf"), "x")


def test_engine_batches_are_futures_bounded_by_io_timeout_ms(tmp_path):
    path = tmp_path / "d.bin"
    path.write_bytes(np.random.default_rng(0).bytes(16 * BS))
    with gpuio.Engine(str(path), backend="fault:uring", io_timeout_ms=50,
                      fault=dict(seed=1, latency_rate=1.0, latency_us=400000)) as e:
        out = aligned_empty(BS)
        f = e.read_async([3], out)
        assert isinstance(f, gpuio.Future)
        with pytest.raises(TimeoutError, match="not complete after 50 ms"):
            f.wait()  # no timeout given: the engine's io_timeout_ms bounds it
        assert f.wait(30) is out and f.done()  # still pending after the timeout; completes later
        assert e.wait_any([f]) == 0  # a settled batch stays an engine batch for wait_any
        with pytest.raises(TypeError, match=r"futures\[0\] must be a gpuio.Future of an engine batch"):
            e.wait_any([Future.completed(out)])


def test_every_asynchronous_call_returns_a_gpuio_future(tmp_path):
    from gpuio_apps.papers.sort import ThreadedStore
    from gpuio_apps.papers.store import PosixStore, Store

    path = tmp_path / "d.bin"
    data = np.frombuffer(np.random.default_rng(1).bytes(64 * BS), np.uint8).copy()
    path.write_bytes(data.tobytes())
    futures = {}
    with gpuio.Engine(str(path), writable=True) as e:
        futures["Engine.read_async"] = e.read_async([1], aligned_empty(BS))
        futures["Engine.write_async"] = e.write_async([2], data[2 * BS:3 * BS].copy())
        t = e.first_target()
        futures["Target.read_async"] = t.read_async([1], aligned_empty(BS))
        futures["Target.write_async"] = t.write_async([2], data[2 * BS:3 * BS].copy())
        for f in futures.values():
            f.wait()
    table = torch.randn(300, 8)
    tf = gpuio.TensorFile.create(tmp_path / "t.npy", (300, 8), "float32")
    tf.scatter(torch.arange(300), table)
    idx = torch.tensor([5, 299, 5])
    futures["TensorFile.prefetch"] = f = tf.prefetch(idx)
    assert torch.equal(f.wait(), table[idx])
    futures["TensorFile.prefetch (no rows)"] = tf.prefetch(torch.tensor([], dtype=torch.long))
    fs = gpuio.TableCache(tf, gpu_cache_bytes=4 * BS, inflight_pages_min=1000, device="cpu")
    futures["TableCache.submit"] = queued = fs.submit(idx)
    assert not queued.done()  # accumulated: read with a later group, or when a wait() needs it
    futures["TableCache.prefetch"] = started = fs.prefetch(torch.tensor([7]))
    assert started.done() and queued.done()  # prefetch starts the reads now, the queued ones with it
    assert torch.equal(queued.wait(), table[idx]) and torch.equal(started.wait(), table[[7]])
    tf.close()
    for store in (Store(str(tmp_path / "s.bin"), 1 << 20), PosixStore(str(tmp_path / "s.bin"), 1 << 20),
                  ThreadedStore(str(tmp_path / "s.bin"), 1 << 20, threads=2)):
        ext = store.alloc("x", 16 * BS)
        src = torch.arange(BS, dtype=torch.uint8)
        futures[f"{type(store).__name__}.write_async"] = w = store.write_async(ext, 0, src)
        w.wait()
        out = torch.empty(BS, dtype=torch.uint8)
        futures[f"{type(store).__name__}.read_async"] = r = store.read_async(ext, 0, out)
        assert torch.equal(r.wait(), src) and torch.equal(out, src)
        store.close()
    wrong = {name: type(f).__name__ for name, f in futures.items() if type(f) is not gpuio.Future}
    assert not wrong, wrong


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU path needs CUDA")
def test_stream_ordered_calls_return_a_future_with_an_event(tmp_path):
    path = tmp_path / "d.bin"
    data = np.frombuffer(np.random.default_rng(2).bytes(8 * BS), np.uint8).copy()
    path.write_bytes(data.tobytes())
    with gpuio.Engine(str(path)) as e:
        out = torch.empty(2 * BS, dtype=torch.uint8, device="cuda")
        f = e.read_async([1, 4], out)
        assert type(f) is gpuio.Future
        torch.cuda.current_stream().wait_event(f.event)
        assert f.wait() is out and f.wait() is out
        assert np.array_equal(out.cpu().numpy(), np.concatenate([data[BS:2 * BS], data[4 * BS:5 * BS]]))
        with pytest.raises(IndexError, match="out of range"):
            e.read_async(torch.tensor([10 ** 6], device="cuda"), torch.empty(BS, dtype=torch.uint8,
                                                                           device="cuda")).wait()


def test_old_names_are_deprecated_aliases():
    import gpuio.cache
    import gpuio.engine
    import gpuio.gpu
    import gpuio.tensor

    for module, name in ((gpuio.engine, "Handle"), (gpuio.gpu, "StreamHandle"), (gpuio.tensor, "Prefetch"),
                         (gpuio.cache, "Ticket")):
        with pytest.warns(DeprecationWarning, match=f"{module.__name__}.{name} is deprecated"):
            assert getattr(module, name) is gpuio.Future
    with pytest.raises(AttributeError, match="no attribute 'Handles'"):
        gpuio.engine.Handles  # noqa: B018


def test_row_sources_satisfy_the_protocols_the_cache_and_loaders_name(tmp_path):
    tf = gpuio.TensorFile.create(tmp_path / "t.npy", (10, 4), "float32")
    np.save(tmp_path / "m.npy", np.zeros((10, 4), np.float32))
    for table in (tf, InMemoryRows(torch.zeros(10, 4)), MemmapRows(tmp_path / "m.npy"), ZeroRows((10, 4), "cpu")):
        assert isinstance(table, Rows) and isinstance(table, RowSource), type(table).__name__
    for proto in (PagedRows, SupportsPrefetch, SupportsScatter, SupportsStats):
        assert isinstance(tf, proto), proto.__name__
        assert not isinstance(InMemoryRows(torch.zeros(1, 1)), proto), proto.__name__
    fs = gpuio.TableCache(tf, gpu_cache_bytes=BS, window=5, device="cpu")
    for proto in (SupportsLookahead, SupportsPrefetch, SupportsStats, OnDevice, RowSource):
        assert isinstance(fs, proto), proto.__name__
    assert fs.window_batches == 5 and not isinstance(tf, SupportsLookahead)
    assert missing(InMemoryRows(torch.zeros(1, 1)), PagedRows) == ["reads_in_place", "gather_pages"]
    tf.close()


class Shaped:
    """A row table in every respect but gather."""
    shape, num_rows, torch_dtype, block_size = (4, 2), 4, torch.float32, BS


def test_a_table_without_gather_is_refused_naming_what_it_lacks():
    with pytest.raises(TypeError) as ei:
        gpuio.TableCache(Shaped())
    msg = str(ei.value)
    assert msg.endswith("TableCache's table must be a row table (gpuio.rows.Rows: shape, gather, num_rows, "
                        "torch_dtype, block_size); got a test_future.Shaped without gather"), msg
    assert "\n" not in msg


def test_pyg_store_refuses_a_put_without_gather():
    pytest.importorskip("torch_geometric")
    from gpuio.pyg import PygFeatureStore

    with pytest.raises(TypeError, match=r"put_tensor's tensor \(not a tensor or ndarray\) must be a row table "
                                        r"\(gpuio.rows.RowSource: shape, gather\); got a builtins.object without "
                                        r"shape, gather$"):
        PygFeatureStore().put_tensor(object(), group_name=None, attr_name="x", index=None)


def test_a_failed_group_read_is_every_queued_requests_error(tmp_path):
    tf = gpuio.TensorFile.create(tmp_path / "t.npy", (100, 4), "float32")
    fs = gpuio.TableCache(tf, gpu_cache_bytes=BS, inflight_pages_min=1000, device="cpu")
    a, b = fs.submit(torch.tensor([1, 2])), fs.submit(torch.tensor([50]))
    tf.close()  # the group's read now fails: neither request may be lost
    with pytest.raises(ValueError, match="closed") as ea:
        a.wait()
    assert b.done() and b.exception() is ea.value
    with pytest.raises(ValueError) as again:
        a.wait()
    assert again.value is ea.value
