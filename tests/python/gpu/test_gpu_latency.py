"""The device API's one-block latency path: device_read=auto lands a small read in one of the
queue's host-mapped slots and the requesting block copies it itself (no staging->GPU copy by the engine);
device_read=batch keeps the engine's copy; stats() says which path ran; the probe's per-hop breakdown adds up.
Skipped where there is no CUDA layer or no GPU; a faulthandler watchdog bounds each test (TEST_GPU_TIMEOUT_S)."""

import numpy as np
import pytest

import gpuio
from gpu_util import skip_without_gpu, watchdog_fixture, why_no_gpu

torch = pytest.importorskip("torch")
BS = 4096


_reason = why_no_gpu()
needs_gpu = skip_without_gpu(_reason)


_watchdog = watchdog_fixture("test_gpu_latency")
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def datafile(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpulat") / "data.bin"
    rng = np.random.default_rng(4321)
    data = rng.integers(0, 256, size=(1024, BS), dtype=np.uint8)
    path.write_bytes(data.tobytes())
    return str(path), data


@needs_gpu
@pytest.mark.parametrize("read", ["auto", "batch"])
def test_device_read_path_lands_every_byte_and_is_reported(datafile, read):
    """130 one-block reads wrap the probe's 64 dst slots twice and reuse the probing block's landing slot 130
    times: a slot rewritten before its reader copied it, or a stale cache line, shows in the data."""
    path, data = datafile
    with gpuio.Engine(path, workers=2) as eng:
        g = eng.attach_gpu(device_read=read)
        dst = gpuio.empty((64, BS), device="cuda")
        s0 = eng.stats()
        ids = [int(x) for x in np.random.default_rng(5).permutation(1024)[:130]]
        h = g.latency_probe(ids, dst, hops=True)
        got = dst.cpu().numpy()
        for i in range(66, 130):
            assert np.array_equal(got[i % 64], data[ids[i]]), f"read {i} (block {ids[i]})"
        s1 = eng.stats()
        assert s1["device_read"] == read
        landed = s1["gpu_landed_requests"] - s0["gpu_landed_requests"]
        copied = s1["gpu_device_requests"] - s0["gpu_device_requests"]
        if read == "auto":
            assert landed == 130 and copied == 0 and s1["device_read_mode"] == "landed"
            assert s1["gpu_copies"] == s0["gpu_copies"]  # no staging->GPU copy by the engine
        else:
            assert landed == 0 and copied == 130 and s1["device_read_mode"] == "batch"
            assert s1["gpu_copies"] > s0["gpu_copies"]
        # hops: GPU-clock parts of each read add up to its round trip; the control plane saw all 130
        assert len(h["total"]) == 130 and len(h["submit"]) == 130
        for t, p, w, c in zip(h["total"], h["publish"], h["wait"], h["copy"]):
            assert 0 < p < t and 0 < w <= t - p and c >= 0
        assert all(x >= 0 for k in ("submit", "engine", "signal") for x in h[k])
        assert s1["gpu_api_requests"] - s0["gpu_api_requests"] == 130


@needs_gpu
def test_stream_ordered_reads_are_not_counted_as_device_api_reads(datafile):
    """The landed/batch counters name device-API reads only: a 64-block stream-ordered read beside three probe
    reads leaves exactly three landed reads, and both land their bytes."""
    path, data = datafile
    with gpuio.Engine(path, workers=2) as eng:
        eng.attach_gpu()
        s0 = eng.stats()
        out = gpuio.empty((64, BS), device="cuda")
        eng.read(torch.arange(100, 164, device="cuda"), out)
        dst = gpuio.empty((64, BS), device="cuda")
        eng.gpu.latency_probe([7, 8, 9], dst)
        s1 = eng.stats()
        assert s1["gpu_landed_requests"] - s0["gpu_landed_requests"] == 3
        assert s1["gpu_device_requests"] == s0["gpu_device_requests"]
        assert np.array_equal(out.cpu().numpy(), data[100:164])
        assert np.array_equal(dst[:3].cpu().numpy(), data[7:10])


@needs_gpu
def test_device_read_option_is_checked(datafile):
    path, _ = datafile
    with gpuio.Engine(path, workers=1) as eng:
        with pytest.raises(ValueError, match="device_read='fast' is not one of auto, batch"):
            eng.attach_gpu(device_read="fast")
