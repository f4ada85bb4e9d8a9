"""gpuio.DeviceArray: random and sequential access equal a NumPy reference, hit/miss counters, a cache smaller
than the working set, write-back on eviction and flush, errors. Each test runs on the CPU implementation
(HostArrayCache, in CI) and on the GPU one (skipped without a CUDA build and device)."""
import os

import numpy as np
import pytest
import torch

from gpuio.device_array import DeviceArray

SEED = int(os.environ.get("GPUIO_TEST_SEED", "1234"))


def _cuda_ok() -> bool:
    try:
        from gpuio import _core
        return bool(_core.cuda_built) and torch.cuda.is_available()
    except ImportError:
        return False


NEEDS_CUDA = [pytest.mark.gpu, pytest.mark.skipif(not _cuda_ok(), reason="needs a CUDA build and GPU")]
DEVICES = ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)]


@pytest.fixture
def rng():
    print(f"seed={SEED}")
    return np.random.default_rng(SEED)


def make(tmp_path, ref, device, cache_bytes, name="a.npy", **kw):
    return DeviceArray.create(tmp_path / name, ref.size, ref.dtype, cache_bytes, fill=ref, device=device, **kw)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,ways,page_bytes", [("int32", 4, None), ("float64", 1, 8192), ("int16", 8, None)])
def test_random_and_sequential_match_numpy_with_a_small_cache(tmp_path, rng, device, dtype, ways, page_bytes):
    n = 50_003
    ref = (rng.standard_normal(n) * 1000).astype(dtype)
    page = page_bytes or 4096
    working_set = -(-n * ref.itemsize // page) * page
    with make(tmp_path, ref, device, 4 * page, ways=ways, page_bytes=page_bytes) as a:
        assert a.cache_bytes < working_set
        idx = rng.integers(0, n, 3000)
        idx[1] = idx[0]
        got = a.gather(torch.from_numpy(idx).to(device))
        assert got.device.type == device
        np.testing.assert_array_equal(got.cpu().numpy(), ref[idx])
        seq = a[0:n].cpu().numpy()
        np.testing.assert_array_equal(seq, ref)
        assert a[n - 1] == ref[n - 1] and a[-2] == ref[n - 2]
        s = a.stats()
        assert s["hits"] + s["misses"] == idx.size + n + 2
        assert s["evictions"] > 0 and s["page_reads"] >= working_set // page
        assert 0 < s["hit_rate"] < 1


@pytest.mark.parametrize("device", DEVICES)
def test_sequential_scan_counts_one_missing_warp_per_page(tmp_path, device):
    pages, epp = 24, 1024  # int32 in 4 KiB pages
    ref = np.arange(pages * epp, dtype=np.int32)
    with make(tmp_path, ref, device, pages * 4096) as a:  # everything fits: no page is read twice
        np.testing.assert_array_equal(a[0:ref.size].cpu().numpy(), ref)
        s = a.stats()
        assert s["page_reads"] == pages and s["evictions"] == 0
        assert s["misses"] == pages * 32, s  # a page's first warp misses, its 31 other warps hit
        assert s["hits"] == ref.size - pages * 32
        a.reset_stats()
        a.gather(torch.arange(ref.size, device=device))
        s = a.stats()
        assert s["hits"] == ref.size and s["misses"] == 0 and s["hit_rate"] == 1.0


@pytest.mark.parametrize("device", DEVICES)
def test_writes_reach_the_file_on_eviction_and_flush(tmp_path, rng, device):
    n = 16 * 1024
    ref = rng.integers(-1000, 1000, n).astype(np.int32)
    path = tmp_path / "a.npy"
    a = make(tmp_path, ref, device, 2 * 4096, ways=1)
    idx = rng.choice(n, 4000, replace=False)
    vals = rng.integers(-(1 << 30), 1 << 30, idx.size).astype(np.int32)
    a[torch.from_numpy(idx)] = torch.from_numpy(vals)
    ref[idx] = vals
    assert a.stats()["page_writes"] > 0  # dirty pages were evicted and written back
    np.testing.assert_array_equal(a[0:n].cpu().numpy(), ref)  # evicted pages come back with the writes
    a.flush()
    written = a.stats()["page_writes"]
    a.flush()
    assert a.stats()["page_writes"] == written  # clean after a flush
    a.close()
    np.testing.assert_array_equal(np.load(path, mmap_mode="r"), ref)


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="needs a CUDA build and GPU")
def test_cpu_and_gpu_placement_agree_for_one_warp(tmp_path):
    """One warp's accesses run the same rounds on both implementations: the same pages end in the same slots."""
    ref = np.arange(64 * 1024, dtype=np.int32)
    idx = torch.tensor([5, 70_000 % ref.size, 3000, 9000, 33_000, 5000, 60_000, 1100] * 4)
    placed = []
    for device in ("cpu", "cuda"):
        with make(tmp_path, ref, device, 6 * 4096, name=f"{device}.npy", ways=2) as a:
            a.gather(idx.to(device))
            placed.append(a.cached_pages())
    assert placed[0] == placed[1]


def test_errors_name_the_bad_value(tmp_path):
    ref = np.arange(5000, dtype=np.int32)
    with make(tmp_path, ref, "cpu", 4 * 4096) as a:
        with pytest.raises(IndexError, match="5000"):
            a.gather(torch.tensor([1, 5000]))
        with pytest.raises(TypeError, match="integers"):
            a.gather(torch.tensor([1.0]))
        with pytest.raises(ValueError, match="values for"):
            a.scatter(torch.tensor([1, 2]), torch.tensor([1]))
    with pytest.raises(ValueError, match="page_bytes=3000"):
        DeviceArray.open(tmp_path / "a.npy", cache_bytes=1 << 20, page_bytes=3000, device="cpu")
    with pytest.raises(ValueError, match="cache_bytes=100"):
        DeviceArray.open(tmp_path / "a.npy", cache_bytes=100, device="cpu")
    with DeviceArray.open(tmp_path / "a.npy", "r", 1 << 20, device="cpu") as ro:
        assert ro[4999] == 4999
        with pytest.raises(ValueError, match="read-only"):
            ro[3] = 7
    with pytest.raises(ValueError, match="device='tpu'"):
        DeviceArray.open(tmp_path / "a.npy", cache_bytes=1 << 20, device="tpu")


def test_the_array_cache_keeps_its_engine_alive(tmp_path):
    """The C++ cache takes the engine's owning object (keep-alive), not an address: dropping every other
    reference to the engine leaves the cache reading correct data; an integer is refused."""
    import gc
    import sys

    from gpuio import _core

    ref = np.arange(3000, dtype=np.int64)
    with make(tmp_path, ref, "cpu", 4 * 4096) as a:
        # on an engine of its own the file's blocks are the engine's: its data starts at block data_offset / 4096
        geometry = dict(a.geometry, base_block=a.file.data_offset // 4096)
    core = _core.EngineCore([str(tmp_path / "a.npy")], {"block_size": 4096})
    before = sys.getrefcount(core)
    cache = _core.HostArrayCache(core, geometry)
    assert sys.getrefcount(core) == before + 1
    del core
    gc.collect()
    idx = np.array([0, 2999, 1234], dtype=np.int64)
    out = np.empty(3, dtype=np.int64)
    cache.gather(idx, out)
    np.testing.assert_array_equal(out, ref[idx])
    # the binding checks its arrays (bindings/arrays.hpp): sizes in elem_bytes, int64 indices
    with pytest.raises(ValueError, match=r"out holds 16 bytes, expected 24 \(len\(idx\) \* elem_bytes\)"):
        cache.gather(idx, np.empty(2, dtype=np.int64))
    with pytest.raises(TypeError, match="idx must be int64, got int32"):
        cache.gather(idx.astype(np.int32), out)
    with pytest.raises(TypeError):
        _core.HostArrayCache(12345, geometry)
