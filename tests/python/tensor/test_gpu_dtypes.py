"""bfloat16 and float16 tables into CUDA memory, bit for bit: TensorFile gather, prefetch, tf[idx] with a CUDA
index, gather_pages, rows written from CUDA tensors of another dtype (cast as torch casts), and a DeviceArray
with a GPU page cache. Each check runs through the engine's GPU path and through pinned host staging, with
rows cut from blocks and whole-block rows read in request order. The same checks run on the CPU in CI; the
CUDA ones skip without a GPU (the reason printed) and run under the GPU tests' watchdog.

Random 16-bit words (NaN payloads, infinities, subnormals, -0) compared as int16: no changed bit can hide."""
import numpy as np
import pytest

from gpu_util import skip_without_gpu, watchdog_fixture, why_no_gpu

torch = pytest.importorskip("torch")

import gpuio  # noqa: E402
from gpuio.tensor import TensorFile  # noqa: E402

_reason = why_no_gpu()
needs_gpu = skip_without_gpu(_reason)
_watchdog = watchdog_fixture("test_gpu_dtypes")
pytestmark = pytest.mark.gpu

HALF = [torch.bfloat16, torch.float16]
# (shape, block size, page_rows that fill a block or None, why)
SHAPES = [((3000, 64), 4096, 32, "packed rows"), ((500, 1500), 4096, None, "rows straddling blocks"),
          ((200, 2048), 4096, None, "whole-block rows")]
PATHS = {"engine GPU path": dict(engine_gpu_path=None, in_place_devices=("cpu",)),
         "pinned host staging": dict(engine_gpu_path=False, in_place_devices=("cpu",)),
         "in request order": dict(engine_gpu_path=None, in_place_devices=("cpu", "cuda"))}


def _words(shape, seed):
    return torch.from_numpy(np.random.default_rng(seed).integers(-32768, 32768, shape, dtype=np.int16))


def _check_table(path, dtype, shape, bs, page_rows, device, options):
    bits = _words(shape, 11)
    rng = np.random.default_rng(12)
    with TensorFile.create(path, shape, dtype, block_size=bs) as tf:
        tf[:] = bits.view(dtype)
        for name, value in options.items():  # which way blocks reach the device
            setattr(tf, name, value)
        idx = torch.from_numpy(rng.integers(0, shape[0], 1000))
        got = tf.gather(idx.to(device))
        assert got.device.type == device and got.dtype == dtype
        assert torch.equal(got.view(torch.int16).cpu(), bits[idx])
        perm = torch.from_numpy(rng.permutation(shape[0])[:64])  # distinct rows
        assert torch.equal(tf[perm.to(device)].view(torch.int16).cpu(), bits[perm])
        h = tf.prefetch(idx[:300].to(device))
        assert torch.equal(h.wait().view(torch.int16).cpu(), bits[idx[:300]])
        if page_rows:
            pages = tf.gather_pages(torch.tensor([0, 5, 2]).to(device), page_rows, device=device)
            want = torch.stack([bits[p * page_rows:(p + 1) * page_rows] for p in (0, 5, 2)])
            assert pages.device.type == device and torch.equal(pages.view(torch.int16).cpu(), want)
        vals = torch.randn(len(perm[:20]), *shape[1:], device=device)  # float32 rows from the device: cast
        tf[perm[:20].to(device)] = vals
        bits[perm[:20]] = vals.cpu().to(dtype).view(torch.int16)
        whole = tf.gather(torch.arange(shape[0], device=device))
        assert torch.equal(whole.view(torch.int16).cpu(), bits)
        assert torch.equal(torch.as_tensor(tf).view(torch.int16), bits)  # the whole table, on the host
    return tf


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("shape,bs,page_rows", [s[:3] for s in SHAPES], ids=[s[3] for s in SHAPES])
def test_half_types_on_the_host(tmp_path, dtype, shape, bs, page_rows):
    _check_table(tmp_path / "h.npy", dtype, shape, bs, page_rows, "cpu", {})


@needs_gpu
@pytest.mark.parametrize("way", list(PATHS))
@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("shape,bs,page_rows", [s[:3] for s in SHAPES], ids=[s[3] for s in SHAPES])
def test_half_types_into_cuda_bit_exact(tmp_path, dtype, shape, bs, page_rows, way):
    tf = _check_table(tmp_path / "h.npy", dtype, shape, bs, page_rows, "cuda", PATHS[way])
    if way != "pinned host staging":  # the engine says its GPU path carried the blocks
        assert tf.engine_gpu_path and tf.stats()["engine"]["gpu_stream_requests"] > 0


def _check_device_array(path, dtype, device):
    n = 20000
    bits = _words(n, 13)
    a = gpuio.DeviceArray.create(path, n, dtype, cache_bytes=64 << 10, fill=bits.view(dtype), device=device)
    try:
        idx = torch.from_numpy(np.random.default_rng(14).integers(0, n, 4000)).to(device)
        got = a[idx]
        assert got.dtype == dtype and torch.equal(got.view(torch.int16).cpu(), bits[idx.cpu()])
        w = torch.randperm(n, generator=torch.Generator().manual_seed(15))[:8]  # distinct elements
        a[w.to(device)] = torch.arange(8, dtype=torch.float64, device=device) / 4  # cast as torch casts
        bits[w] = (torch.arange(8, dtype=torch.float64) / 4).to(dtype).view(torch.int16)
        a.flush()
    finally:
        a.close()
    words = np.load(path)  # bfloat16: NumPy reads the stored uint16 words
    assert np.array_equal(words.view(np.int16), bits.numpy())


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_device_array_half_types_on_the_host(tmp_path, dtype):
    _check_device_array(tmp_path / "a.npy", dtype, "cpu")


@needs_gpu
@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_device_array_half_types_on_cuda(tmp_path, dtype):
    _check_device_array(tmp_path / "a.npy", dtype, "cuda")
