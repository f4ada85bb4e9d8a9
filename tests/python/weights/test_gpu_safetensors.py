"""gpuio.safetensors into and out of CUDA memory (GPU machine; skipped without CUDA): cold and warm loads bit
for bit with the data path reported, saves from CUDA tensors that `safetensors` reads, slices, DCP onto CUDA
targets, and a load in a background thread while the main thread launches CUDA work of its own (bounded by
the watchdog: a hang fails the run)."""
from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")
sft = pytest.importorskip("safetensors.torch")

import gpuio.safetensors as gst  # noqa: E402

from gpu_util import watchdog_fixture  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")]
_watchdog = watchdog_fixture("test_gpu_safetensors")


def _model(seed: int = 0, n: int = 24) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    t = {f"w{i}": torch.randn(1024, 1021 + i, generator=g).to(torch.bfloat16 if i % 2 else torch.float32)
         for i in range(n)}
    t.update(scalar=torch.tensor(3.0), empty=torch.empty(0, 7), tail=torch.randn(99, generator=g))
    return t


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(a[k].cpu(), b[k].cpu()) for k in a)



@pytest.mark.parametrize("huge_slots", [False, True])
def test_cuda_load_cold_and_warm(tmp_path, monkeypatch, huge_slots):
    """Loads stage through the plan reader's rings from the process's one pinned pool whatever
    safetensors.huge_slots says (it is the saves' knob): made by the first loads and reused by the next."""
    from gpuio import _core

    monkeypatch.setenv("GPUIO_SAFETENSORS_HUGE_SLOTS", "1" if huge_slots else "0")
    t = _model()
    p = tmp_path / "m.safetensors"
    sft.save_file(t, p)
    made = []
    for regime in ("warm", "cold", "cold"):
        if regime == "cold":
            gst.evict(p)
        st: dict = {}
        out = gst.load_file(p, device="cuda", stats=st)
        assert all(v.is_cuda for v in out.values()) and _same(out, t), regime
        assert st["data_path"].endswith("-> pinned -> cuda:0") and st["pipeline"] == "cpp", st
        assert st["slots"] == "pool" and "huge_slots" not in st, st
        pool = _core.pinned_pool_stats()
        assert pool["registered_bytes"] > 0 and pool["free_bytes"] == pool["made_bytes"], pool
        made.append(pool["made_bytes"])
    # the warm load made rings, the cold ones at most one ring per call between them
    assert made[0] > 0 and made[2] - made[0] <= st["threads"] * 2 * st["piece_bytes"], (made, st["threads"])
    assert st["direct_bytes"] > 0, st["data_path"]
    with gst.safe_open(p, device="cuda:0") as f:
        assert torch.equal(f.get_slice("w0")[5:9, 3:7].cpu(), t["w0"][5:9, 3:7])
        assert torch.equal(f.get_tensor("w3").cpu(), t["w3"])


@pytest.mark.parametrize("huge_slots", [False, True])
def test_cuda_save_slots(tmp_path, monkeypatch, huge_slots):
    """safetensors.huge_slots picks a CUDA save's page-locked slots: gpuio's pool of 2 MiB-page slots (made by the
    first save, reused by the next) or torch's pinned blocks; the file loads bit for bit either way."""
    from gpuio import _pinned

    monkeypatch.setenv("GPUIO_SAFETENSORS_HUGE_SLOTS", "1" if huge_slots else "0")
    t = {k: v.cuda() for k, v in _model(4, 8).items()}
    made = []
    for i in range(2):
        p = tmp_path / f"s{i}.safetensors"
        st: dict = {}
        gst.save_file(t, p, stats=st)
        assert st["huge_slots"] is huge_slots and st["slots"] == ("pool" if huge_slots else "torch"), st
        assert _same(sft.load_file(p), t)
        made.append(_pinned.pool_stats()["made_bytes"])
    if huge_slots:
        assert made[0] > 0 and made[1] == made[0], made  # the second save reused the first one's slots


def test_save_from_cuda_loads_everywhere(tmp_path):
    t = {k: v.cuda() for k, v in _model(1).items()}
    p = tmp_path / "s.safetensors"
    st: dict = {}
    gst.save_file(t, p, metadata={"k": "v"}, stats=st)
    assert st["data_path"].startswith("cuda:0 -> pinned -> ")
    assert _same(sft.load_file(p), t) and _same(gst.load_file(p, device="cuda"), t)


def test_dcp_onto_cuda_targets(tmp_path):
    dcp = pytest.importorskip("torch.distributed.checkpoint")
    state = {"m": {k: v.cuda() for k, v in _model(2, 6).items()}}
    dcp.save(state, storage_writer=gst.StorageWriter(tmp_path / "c"))
    target = {"m": {k: torch.zeros_like(v) for k, v in state["m"].items()}}
    dcp.load(target, storage_reader=gst.StorageReader(tmp_path / "c"))
    assert _same(target["m"], state["m"]) and all(v.is_cuda for v in target["m"].values())


@pytest.mark.parametrize("ring_kib", [64, 1024])
def test_cuda_load_through_the_ring(tmp_path, monkeypatch, ring_kib):
    """safetensors.ring_kib (with direct_kib=0: disk reads in ring pieces too): bytes on disk go piece by piece
    through each plan reader call's ring (64 KiB: 32 KiB pieces, many per tensor), the file's partial last block by pread; bit for bit, warm (the page cache) and cold."""
    monkeypatch.setenv("GPUIO_SAFETENSORS_RING_KIB", str(ring_kib))
    monkeypatch.setenv("GPUIO_SAFETENSORS_DIRECT_KIB", "0")  # disk reads through the ring's pieces too
    monkeypatch.setenv("GPUIO_SAFETENSORS_DIRECT_PIECES", "2")
    t = _model(5)
    p = tmp_path / "m.safetensors"
    sft.save_file(t, p)
    assert p.stat().st_size % 4096, "the test wants a partial last block"
    for regime in ("warm", "cold"):  # warm: just written; the ring's O_DIRECT pieces serve bytes on disk only
        if regime == "cold":
            gst.evict(p)
        st: dict = {}
        out = gst.load_file(p, device="cuda", stats=st)
        assert _same(out, t) and st["ring_kib"] == ring_kib and st["piece_bytes"] == ring_kib << 9, (regime, st)
        if regime == "cold":
            # the header's block is resident again (read to plan the load): tensors in it may come from there
            assert st["direct_bytes"] > 0 and st["buffered_bytes"] > 0 and st["pagecache_bytes"] < 8192, st
            assert st["disk_read_bytes"] % 4096 == 0 and st["inflight_max"] <= 2, st
            assert st["pagecache_bytes"] + st["direct_bytes"] + st["buffered_bytes"] == st["bytes"], st


@pytest.mark.parametrize("ring_kib", [64, 1024])
def test_load_in_a_thread_beside_cuda_work(tmp_path, monkeypatch, ring_kib):
    monkeypatch.setenv("GPUIO_SAFETENSORS_RING_KIB", str(ring_kib))
    t = _model(3)
    p = tmp_path / "m.safetensors"
    sft.save_file(t, p)
    done, errors = threading.Event(), []

    def loader():
        try:
            for i in range(6):
                if i % 2:
                    gst.evict(p)
                assert _same(gst.load_file(p, device="cuda"), t)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)
        finally:
            done.set()

    th = threading.Thread(target=loader, daemon=True)
    th.start()
    it = 0
    while not done.is_set():  # first launches, cudaFree and device syncs while the loader copies
        a = torch.randn(512 + it, 512, device="cuda")
        (a @ a.T).sum().item()
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        it += 1
    th.join(timeout=60)
    assert not errors, errors
