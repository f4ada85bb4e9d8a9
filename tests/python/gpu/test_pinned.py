"""The process's one pinned pool as Python sees it (_core.pinned_take, gpuio._pinned, gst.staging()): blocks made
once and reused by size, owned blocks unmapped when let go, slots back in the pool when given or dropped, a forked
child's own pool, one report of every page-locked byte. On the CPU (registration refused: no GPU) and, marked gpu,
on the GPU machine: real page-locked slots in 2 MiB pages taken and given by threads while another thread runs
CUDA work, and a GPU runtime's staging, bounce pool and fixed allocations counted in the one report."""
from __future__ import annotations

import json
import os
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gpuio  # noqa: E402
import gpuio.safetensors as gst  # noqa: E402
from gpuio import _core, _pinned  # noqa: E402

from gpu_util import skip_without_gpu, watchdog_fixture, why_no_gpu  # noqa: E402

_watchdog = watchdog_fixture("test_pinned")
MiB = 1 << 20


def _use(name: str) -> dict:
    return _core.pinned_pool_stats()["uses"].get(name, {"made_bytes": 0, "registered_bytes": 0, "free_bytes": 0})


@pytest.fixture
def empty_free_list():
    """No free pooled block of any size left by other tests: a take makes a block or reuses one given here."""
    _core.pinned_pool_release()
    yield
    _core.pinned_pool_release()


def test_pooled_blocks_are_made_once_and_reused_by_size(empty_free_list):
    a = _core.pinned_take(5000, registered=False, use="t_reuse")
    assert a.nbytes == 5000 and a.capacity == 2 * MiB and a.address % (2 * MiB) == 0 and not a.registered
    view = a.array()
    assert view.shape == (5000,) and view.dtype == np.uint8 and view.ctypes.data == a.address
    view[:] = 7
    b = _core.pinned_take(3 * MiB, registered=False, use="t_reuse")  # another size: rounded to 4 MiB, made anew
    assert b.capacity == 4 * MiB
    assert _use("t_reuse") == {"made_bytes": 6 * MiB, "registered_bytes": 0, "free_bytes": 0}
    addr = a.address
    a.give()
    a.give()  # a second give does nothing
    assert not a.alive and _use("t_reuse")["free_bytes"] == 2 * MiB
    with pytest.raises(ValueError, match="after give"):
        a.array()
    c = _core.pinned_take(2 * MiB, registered=False, use="t_reuse")
    assert c.address == addr and _use("t_reuse")["made_bytes"] == 6 * MiB  # reused, not made again
    c.give()
    b.give()
    assert _core.pinned_pool_release() == 6 * MiB
    assert _use("t_reuse")["made_bytes"] == 0 and "t_reuse" not in _core.pinned_pool_stats()["uses"]


def test_a_block_goes_back_when_its_last_view_does(empty_free_list):
    block = _core.pinned_take(MiB, registered=False, use="t_views")
    t = torch.from_numpy(block.array())[10:20]
    del block
    assert _use("t_views")["free_bytes"] == 0  # the tensor keeps it
    t.fill_(3)
    del t
    assert _use("t_views")["free_bytes"] == 2 * MiB


def test_owned_blocks_are_counted_apart_and_unmapped_when_let_go(empty_free_list):
    before = _core.pinned_pool_stats()
    block = _core.pinned_take(3 * MiB, registered=False, pooled=False, use="t_owned", touch=False)
    st = _core.pinned_pool_stats()
    assert st["owned_bytes"] == before["owned_bytes"] + 4 * MiB and st["made_bytes"] == before["made_bytes"]
    block.array()[-1] = 1  # faulted in on use
    block.give()
    st = _core.pinned_pool_stats()
    assert st["owned_bytes"] == before["owned_bytes"] and st["free_bytes"] == before["free_bytes"]
    assert _core.pinned_pool_free_blocks() == []  # not kept for reuse


def test_registration_is_refused_without_a_gpu_and_says_so():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: registration works (the gpu tests below check it)")
    block = _core.pinned_take(4096, registered=True, pooled=False, use="t_refused")
    assert not block.registered and not block.register()
    assert _use("t_refused")["registered_bytes"] == 0
    block.give()


def test_slots_are_taken_given_and_reused_through_pinned(empty_free_list):
    a = _pinned.take_slot(4096, registered=False)
    b = _pinned.take_slot(4096, registered=False)
    assert a.dtype == torch.uint8 and a.numel() == 4096 and a.data_ptr() != b.data_ptr()
    assert _pinned.pool_stats() == {"made_bytes": 4 * MiB, "free_bytes": 0}
    _pinned.give_slot(a)
    assert _pinned.pool_stats() == {"made_bytes": 4 * MiB, "free_bytes": 2 * MiB}
    assert _pinned.take_slot(4096, registered=False).data_ptr() == a.data_ptr()  # dropped at once: back to the pool
    _pinned.give_slot(b)
    assert _pinned.release_slots() == 4 * MiB and _pinned.pool_stats() == {"made_bytes": 0, "free_bytes": 0}


def test_no_page_locked_memory_where_cuda_cannot_register(monkeypatch):
    assert _pinned.page_locked(0) is None and _pinned.take_slot(0) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _pinned.page_locked(MiB) is None and _pinned.take_slot(MiB) is None


def test_a_forked_child_starts_its_own_pool(empty_free_list):
    parent = _core.pinned_take(MiB, registered=False, use="t_fork")
    parent_addr = parent.address
    parent.give()  # free in the parent's pool
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave at once (no atexit, no pytest teardown)
        try:
            os.close(r)
            before = _use("t_fork")
            child = _core.pinned_take(MiB, registered=False, use="t_fork")
            out = {"before": before, "address": child.address, "after": _use("t_fork"),
                   "released": _core.pinned_pool_release()}
            child.give()
            out["free"] = _use("t_fork")["free_bytes"]
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        got = json.loads(f.read() or "{}")
    os.waitpid(pid, 0)
    assert got["before"] == {"made_bytes": 0, "registered_bytes": 0, "free_bytes": 0}, got  # the parent's not here
    assert got["address"] != parent_addr and got["after"]["made_bytes"] == 2 * MiB, got  # made its own
    assert got["released"] == 0 and got["free"] == 2 * MiB, got
    assert _use("t_fork") == {"made_bytes": 2 * MiB, "registered_bytes": 0, "free_bytes": 2 * MiB}  # parent's intact


def test_staging_reports_one_pool_with_the_engine_staging_in_it(tmp_path):
    path = tmp_path / "d.bin"
    path.write_bytes(b"\0" * (1 << 20))
    eng = gpuio.Engine(str(path), workers=1, staging_bytes=4 << 20)
    try:
        st = gst.staging()
        assert st["pools"] == 1 and st["pool"]["pools"] == 1, st
        staging = st["pool"]["uses"]["engine_staging"]
        assert staging["made_bytes"] >= 4 << 20 and staging["free_bytes"] == 0, st
        assert st["pool"]["owned_bytes"] >= staging["made_bytes"], st
        pool = st["pool"]
        assert st["page_locked_bytes"] == (pool["registered_bytes"] + pool["owned_registered_bytes"]
                                           + pool["fixed_bytes"]), st
        assert sum(u["registered_bytes"] for u in pool["uses"].values()) == st["page_locked_bytes"], st
    finally:
        eng.close()
    del eng
    import gc

    gc.collect()


def test_stream_buffers_are_an_owned_block_of_the_pool():
    from gpuio.streams.buffers import BufferPool

    before = _use("stream_buffers")["made_bytes"]
    pool = BufferPool(8 << 20, 1 << 20)
    assert pool.view(3).ctypes.data % 4096 == 0 and pool.view(7).shape == (1 << 20,)
    assert _use("stream_buffers")["made_bytes"] == before + (8 << 20)
    del pool
    assert _use("stream_buffers")["made_bytes"] == before


_reason = why_no_gpu()
needs_gpu = skip_without_gpu(_reason)


def _thp_mode() -> str:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return "never"


@pytest.mark.gpu
@needs_gpu
def test_slots_are_page_locked_in_huge_pages_and_shared_by_threads_beside_cuda_work(empty_free_list):
    """Eight threads take, fill, copy to the GPU and give back 16 MiB slots, 20 times each, while the main thread
    launches CUDA work of its own (lazy kernel loads, cudaFree, synchronise): each copy arrives intact, the pool made
    at most one slot per thread, all registered, and the slots lie in 2 MiB pages where transparent huge pages are on."""
    size, errors = 16 << 20, []

    def work(k: int) -> None:
        try:
            for i in range(20):
                slot = _pinned.take_slot(size)
                assert slot is not None and slot.is_pinned()
                slot.fill_((k * 20 + i) % 251)
                got = slot.to("cuda", non_blocking=True)
                torch.cuda.current_stream().synchronize()
                _pinned.give_slot(slot)
                assert int(got.min()) == int(got.max()) == (k * 20 + i) % 251
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    from gpu_threads_child import main_thread_work

    threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(8)]
    for t in threads:
        t.start()
    it = 0
    while any(t.is_alive() for t in threads):
        main_thread_work("all", it % 8)
        it += 1
    for t in threads:
        t.join()
    assert not errors, errors
    st = _pinned.pool_stats()
    assert st["made_bytes"] == st["free_bytes"] and 0 < st["made_bytes"] <= 8 * size, st
    assert _use("slots")["registered_bytes"] == st["made_bytes"]
    if _thp_mode() != "never":
        assert _pinned.huge_page_bytes() >= st["made_bytes"] // 2, (_pinned.huge_page_bytes(), st)
    _pinned.release_slots()


@pytest.mark.gpu
@needs_gpu
def test_page_locked_host_memory_is_pinned_counted_and_let_go_with_its_last_view():
    before = _use("host_buffer")
    t = _pinned.page_locked(3 * MiB + 5)
    assert t is not None and t.is_pinned() and t.numel() == 3 * MiB + 5
    assert _use("host_buffer")["registered_bytes"] == before["registered_bytes"] + 4 * MiB
    dev = t[:4096].to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    assert dev.numel() == 4096
    del t
    assert _use("host_buffer") == before  # unregistered and unmapped


@pytest.mark.gpu
@needs_gpu
def test_a_gpu_runtime_pins_only_through_the_one_pool(tmp_path):
    """An engine with its GPU runtime: its staging (registered in place), the stream path's bounce pool and the
    runtime's fixed allocations (queues, completion cells, id buffer) are all in gst.staging()'s one report, and
    leave it when the runtime closes."""
    path = tmp_path / "d.bin"
    path.write_bytes(b"\1" * (4 << 20))
    base = gst.staging()
    eng = gpuio.Engine(str(path), workers=2, staging_bytes=8 << 20)
    eng.attach_gpu()
    try:
        out = torch.zeros(16 * 4096, dtype=torch.uint8, device="cuda")
        eng.read(np.arange(16, dtype=np.int64), out)  # through the stream path's bounce pool
        torch.cuda.synchronize()
        assert int(out.min()) == 1
        st = gst.staging()
        uses = st["pool"]["uses"]
        assert st["pools"] == 1
        assert uses["engine_staging"]["registered_bytes"] >= 8 << 20, uses
        assert uses["stream_bounce"]["registered_bytes"] > _registered(base, "stream_bounce"), uses
        for fixed in ("gpu_queues", "stream_cells", "gpu_request_ids"):
            assert uses[fixed]["registered_bytes"] > _registered(base, fixed), (fixed, uses)
        assert st["pool"]["fixed_bytes"] > base["pool"]["fixed_bytes"], st
        assert st["page_locked_bytes"] > base["page_locked_bytes"] + (8 << 20), st
    finally:
        eng.close()
    after = gst.staging()
    for name in ("stream_bounce", "gpu_queues", "stream_cells", "gpu_request_ids"):
        assert _registered(after, name) == _registered(base, name), (name, after["pool"]["uses"])


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("nbytes, align", [(4096, 4096), (5000, 4096), (1 << 20, 4096), (3 * MiB + 7, 512)])
def test_torch_pinned_blocks_are_aligned_page_locked_and_exact(nbytes, align):
    """The one helper for torch's pinned blocks (CUDA saves' slots beside the pool, TensorFile's CUDA reads)."""
    t = _pinned.torch_pinned(nbytes, align)
    assert t.is_pinned() and t.numel() == nbytes and t.dtype == torch.uint8 and t.data_ptr() % align == 0
    t.fill_(7)
    dev = t.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    assert int(dev.min()) == 7 and int(dev.max()) == 7


def _registered(staging: dict, use: str) -> int:
    return staging["pool"]["uses"].get(use, {}).get("registered_bytes", 0)
