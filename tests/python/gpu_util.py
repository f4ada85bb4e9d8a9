"""What the GPU test files share: why there is no GPU path here (None where there is one), the skip marker, the
watchdog that turns a hang into a traceback and a failed run (TEST_GPU_TIMEOUT_S, default 60 s a test), and a
training thread doing CUDA work beside the code under test (cuda_training)."""
from __future__ import annotations

import faulthandler
import os
import sys
import threading
from contextlib import contextmanager

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


@contextmanager
def cuda_training(table):
    """A training thread: CUDA work of its own (lazy kernel loads, cudaFree, synchronise: gpu_threads_child's) and
    gathers through a GPU page cache of the main process, every row checked, until the block ends. The block starts
    once the thread has finished a step, so the code under test always runs beside CUDA work in flight."""
    import torch

    import gpuio
    from gpu_threads_child import main_thread_work
    from workers_util import ROWS, expected_rows

    fs = gpuio.TableCache(table, gpu_cache_bytes=8 * 4096, device="cuda", accumulate=False)
    stop, stepped, errors, steps = threading.Event(), threading.Event(), [], [0]

    def run():
        try:
            while not stop.is_set():
                main_thread_work("all", steps[0] % 8)
                ids = torch.randint(0, ROWS, (64,))
                if not torch.equal(fs.gather(ids).cpu(), expected_rows(ids)):
                    errors.append(f"step {steps[0]}: wrong rows from the GPU cache")
                steps[0] += 1
                stepped.set()
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(f"{type(e).__name__}: {e}")
        finally:
            stepped.set()  # an error ends the wait below too
    t = threading.Thread(target=run, name="training")
    t.start()
    try:
        assert stepped.wait(60), "the training thread finished no step in 60 s"
        assert not errors, errors
        yield fs
    finally:
        stop.set()
        t.join(60)
    assert not t.is_alive(), "the training thread did not stop"
    assert not errors, errors
