"""What the GPU test files share: why there is no GPU path here (None where there is one), the skip marker, and
the watchdog that turns a hang into a traceback and a failed run (TEST_GPU_TIMEOUT_S, default 60 s a test)."""
from __future__ import annotations

import faulthandler
import os
import sys

import pytest


def why_no_gpu() -> str | None:
    import torch

    import gpuio
    from gpuio import _core

    if not _core.cuda_built:
        return "gpuio built without the CUDA layer"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return gpuio.gpu.probe()["error"] or None


def skip_without_gpu(reason: str | None):
    return pytest.mark.skipif(reason is not None, reason=f"no GPU path: {reason}")


def watchdog_fixture(label: str):
    """An autouse fixture for a test module (`_watchdog = watchdog_fixture("test_x")`): each test prints its
    name as it starts and runs under the watchdog, cancelled when it ends."""
    @pytest.fixture(autouse=True)
    def _watchdog(request):
        print(f"\n[{label}] start {request.node.name}", file=sys.stderr, flush=True)
        faulthandler.dump_traceback_later(float(os.environ.get("TEST_GPU_TIMEOUT_S", "60")), exit=True)
        yield
        faulthandler.cancel_dump_traceback_later()
    return _watchdog
