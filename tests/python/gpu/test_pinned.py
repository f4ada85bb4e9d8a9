"""gpuio._pinned: the pool's bookkeeping on the CPU (page_locked replaced by plain tensors), and on the GPU
machine real page-locked slots in 2 MiB pages taken and given by threads while another thread runs CUDA work."""
from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")

from gpuio import _core, _pinned  # noqa: E402

from gpu_util import watchdog_fixture  # noqa: E402

_watchdog = watchdog_fixture("test_pinned")


@pytest.fixture
def fake_pool(monkeypatch):
    """A fresh pool whose slots are plain tensors, counting what page_locked made."""
    made = []

    def fake(nbytes):
        made.append(nbytes)
        return torch.empty(nbytes, dtype=torch.uint8)

    monkeypatch.setattr(_pinned, "_pool", _pinned._Pool())
    monkeypatch.setattr(_pinned, "page_locked", fake)
    _core.pinned_pool_release()  # release_slots also frees the plan reader pool's free blocks: none left by others
    return made


def test_slots_are_made_once_and_reused_by_size(fake_pool):
    a, b = _pinned.take_slot(4096), _pinned.take_slot(4096)
    assert a.data_ptr() != b.data_ptr() and fake_pool == [4096, 4096]
    _pinned.give_slot(a)
    assert _pinned.take_slot(4096).data_ptr() == a.data_ptr() and fake_pool == [4096, 4096]
    assert _pinned.take_slot(8192).numel() == 8192 and fake_pool == [4096, 4096, 8192]  # another size: a new slot
    _pinned.give_slot(b)
    assert _pinned.pool_stats() == {"made_bytes": 4096 * 2 + 8192, "free_bytes": 4096}
    assert _pinned.release_slots() == 4096
    assert _pinned.pool_stats() == {"made_bytes": 4096 + 8192, "free_bytes": 0}
    _pinned.take_slot(4096)
    assert fake_pool == [4096, 4096, 8192, 4096]  # released: made again


def test_a_forked_child_does_not_take_the_parents_slots(fake_pool, monkeypatch):
    import gpuio.engine

    _pinned.give_slot(_pinned.take_slot(4096))
    monkeypatch.setattr(gpuio.engine, "_fork_generation", gpuio.engine.fork_generation() + 1)  # as a child sees it
    assert _pinned.pool_stats() == {"made_bytes": 0, "free_bytes": 0}
    _pinned.take_slot(4096)
    assert fake_pool == [4096, 4096]


def test_none_where_nothing_can_be_page_locked(monkeypatch):
    assert _pinned.page_locked(0) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _pinned.page_locked(1 << 20) is None and _pinned.take_slot(1 << 20) is None


def _thp_mode() -> str:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return "never"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")
def test_slots_are_page_locked_in_huge_pages_and_shared_by_threads_beside_cuda_work(monkeypatch):
    """Eight threads take, fill, copy to the GPU and give back 16 MiB slots, 20 times each, while the main thread
    launches CUDA work of its own (lazy kernel loads, cudaFree, synchronise): each copy arrives intact, the pool made at most one slot per thread, and the slots lie in 2 MiB
    pages where transparent huge pages are on."""
    monkeypatch.setattr(_pinned, "_pool", _pinned._Pool())
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
    if _thp_mode() != "never":
        assert _pinned.huge_page_bytes() >= st["made_bytes"] // 2, (_pinned.huge_page_bytes(), st)
    _pinned.release_slots()
