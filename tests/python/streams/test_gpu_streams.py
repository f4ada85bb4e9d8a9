"""Stream store on the GPU machine: tensors written from and read into CUDA memory through the stream
buffer, which the store page-locks for CUDA on the first CUDA read (DMA on a copy engine, as from the
engine's staging). Skipped, with the reason, where torch sees no CUDA device."""
from __future__ import annotations

import numpy as np
import pytest

from gpuio.streams import DatasetCache
from streams_util import open_small, write_all

torch = pytest.importorskip("torch")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")
pytestmark = pytest.mark.gpu


@needs_cuda
def test_gpu_tensors_round_trip_across_sblocks(tmp_path):
    g = torch.Generator(device="cuda").manual_seed(5)
    # odd sizes: payloads start at unaligned offsets and span several sblocks (SMALL's are 16 KiB)
    objs = [torch.randn(n, device="cuda", generator=g) for n in (1, 12345, 1 << 18, 77777)]
    objs.append(torch.randint(0, 255, (3, 50001), dtype=torch.uint8, device="cuda", generator=g))
    host = np.random.default_rng(6).standard_normal((300, 129)).astype(np.float32)
    with open_small(tmp_path / "s.bin", create_bytes=64 << 20) as st:
        sid = write_all(st, [*objs, host])  # GPU tensors -> stream buffer by DMA, no host tensor in between
        assert not st.stats()["buffer_pinned_for_cuda"]  # nothing read into CUDA yet
        rd = st.open_stream(sid)
        back = [st.read_stream(rd, device="cuda") for _ in range(len(objs) + 1)]
        assert st.read_stream(rd, device="cuda") is None
        st.close_stream(rd)
        assert st.stats()["buffer_pinned_for_cuda"]
    for t, b in zip(objs, back):
        assert b.is_cuda and b.dtype == t.dtype and torch.equal(b, t)
    # an ndarray record asked for on CUDA arrives as a CUDA tensor of its dtype, filled from the buffer
    assert back[-1].is_cuda and back[-1].dtype == torch.float32
    assert np.array_equal(back[-1].cpu().numpy(), host)


@needs_cuda
def test_cache_streams_batches_into_cuda(tmp_path):
    batches = [torch.full((1000 + i, 16), float(i)) for i in range(20)]
    with DatasetCache(str(tmp_path / "c.bin"), device="cuda", mode="c", create_bytes=64 << 20,
               sblock_bytes=64 << 10, buffer_pool_bytes=1 << 20, block_size=4096) as cache:
        cache.fill(iter(batches))
        for _ in range(2):  # every epoch reads the same batches back, on the GPU
            got = list(cache)
            assert len(got) == len(batches)
            for b, g in zip(batches, got):
                assert g.is_cuda and torch.equal(g.cpu(), b)
