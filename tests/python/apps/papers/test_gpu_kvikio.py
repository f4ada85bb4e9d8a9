"""The KvikIO baseline (gpuio_apps.papers.kvikio_store) with the real library on the GPU machine: KvikioStore reads and
writes CUDA and host tensors over a RAID-0 pair exactly as the engine and the pread baseline see the bytes, and
the tiny GEMM runs it as its second baseline. Skipped, with the reason, without a GPU path or a usable kvikio
(the wheels in /tmp/whl-site, put there by scripts/gpu.sh from .whl/)."""
import numpy as np
import pytest

from gpu_util import skip_without_gpu, watchdog_fixture, why_no_gpu

torch = pytest.importorskip("torch")

from gpuio_apps.papers import gemm, kvikio_store  # noqa: E402
from kvikio_util import three_stores  # noqa: E402


def _why_no_kvikio():
    try:
        kvikio_store.load_kvikio()
    except ImportError as e:
        return str(e)
    return None


_reason = why_no_gpu()
needs_gpu = skip_without_gpu(_reason)
_no_kvikio = _why_no_kvikio() if _reason is None else None  # probed only where there is a GPU (needs libcuda)
needs_kvikio = pytest.mark.skipif(_no_kvikio is not None, reason=f"no kvikio: {_no_kvikio}")
_watchdog = watchdog_fixture("test_gpu_kvikio")
pytestmark = pytest.mark.gpu


@needs_gpu
@needs_kvikio
@pytest.mark.parametrize("where", ["cuda", "cpu"])
def test_kvikio_store_matches_engine_and_pread(tmp_path, where):
    paths = [str(tmp_path / f"d{i}.bin") for i in range(3)]
    data = torch.from_numpy(np.random.default_rng(3).integers(0, 256, 1 << 20, dtype=np.uint8))
    with three_stores(paths) as (g, p, k, e):
        g.write(e[0], 0, data)
        out = torch.zeros((1 << 20) - 8192, dtype=torch.uint8, device=where)
        assert k.read_async(e[0], 4096, out).wait() is out
        assert torch.equal(out.cpu(), data[4096:-4096])
        src = data[:200704].to(where)
        k.write(e[1], 8192, src)
        k.sync()
        back = torch.empty(200704, dtype=torch.uint8)
        p.read(e[1], 8192, back)
        assert torch.equal(back, data[:200704])
        assert "compat mode ON" in k.data_path()


@needs_gpu
@needs_kvikio
def test_gemm_tiny_on_cuda_runs_the_kvikio_baseline(tmp_path):
    r = gemm.run("tiny", str(tmp_path / "g.bin"), "cuda", dtype="bf16")
    assert r["check"].startswith("ok") and "baseline" not in r["check"], r["check"]
    assert r["kvikio_s"] > 0 and "kvikio_skipped" not in r
