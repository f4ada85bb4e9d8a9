"""GPU reads on a background thread never block the training thread: a background thread reading through gpuio
into GPU memory while the main thread launches CUDA work of its own (first launches that load kernels lazily, cudaFree via empty_cache, device synchronise).
At 1cf507e this deadlocked `gpuio demo` on the H200 with either stream wait mode. Each case runs in a fresh
process (gpu_threads_child.py) bounded by a timeout; a hang prints the child's Python stacks (faulthandler)
and, where cuda-gdb exists, its native stacks, then fails. Skipped without a GPU."""
import os
import shutil
import signal
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import gpuio  # noqa: E402

from gpu_util import skip_without_gpu, why_no_gpu  # noqa: E402

# gpu_threads_child.py is a shared helper: tests/python, above this folder
CHILD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gpu_threads_child.py")
TIMEOUT_S = float(os.environ.get("GPUIO_THREADS_TIMEOUT_S", "60"))


_reason = why_no_gpu()
pytestmark = [pytest.mark.gpu, skip_without_gpu(_reason)]


def native_stacks(pid: int) -> str:
    """Every thread's native stack of a live process, through cuda-gdb (the GPU machine has no gdb)."""
    dbg = shutil.which("cuda-gdb") or shutil.which("gdb")
    if not dbg:
        return "(no cuda-gdb/gdb on PATH: native stacks not taken)"
    try:
        r = subprocess.run([dbg, "-p", str(pid), "-batch", "-ex", "thread apply all bt 25"],
                           capture_output=True, text=True, timeout=60)
        return r.stdout[-20000:] + r.stderr[-2000:]
    except subprocess.TimeoutExpired:
        return f"({dbg} did not answer in 60 s)"


def run_child(*args: str, env=None, timeout: float = TIMEOUT_S):
    """(returncode or None on a hang, output). A hang leaves the native stacks in the output."""
    cmd = [sys.executable, "-X", "faulthandler", CHILD, "--timeout", str(timeout + 30), *args]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})), start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        stacks = native_stacks(p.pid)
        p.send_signal(signal.SIGABRT)  # faulthandler prints the Python stacks on SIGABRT
        try:
            out, _ = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
        return None, f"{out}\n--- native stacks ---\n{stacks}"


@pytest.mark.parametrize("path", ["store", "stream", "event"])
@pytest.mark.parametrize("wait", ["kernel", "wait_value"])
def test_background_reads_beside_main_thread_cuda_work(wait, path):
    if wait == "wait_value" and gpuio.gpu.stream_wait_selftest() != "works":
        pytest.skip(f"cuStreamWaitValue32 self-test: {gpuio.gpu.stream_wait_selftest()}")
    rc, out = run_child("--wait", wait, "--path", path, "--main", "all", "--seconds", "6")
    print(out)
    assert rc is not None, f"hang: the child did not finish in {TIMEOUT_S:g} s (wait={wait}, path={path})\n{out[-6000:]}"
    assert rc == 0 and "ok reads=" in out, out[-4000:]
    reads = int(out.split("ok reads=")[1].split()[0])
    assert reads > 0, out


@pytest.mark.parametrize("wait", ["kernel", "wait_value"])
def test_one_block_reads_by_warp_copy_beside_main_thread_cuda_work(wait):
    """stream_copy=kernel: the fused wait+copy kernel spins like the wait kernel; the main thread's lazy loads,
    cudaFree and synchronise must not deadlock with it (other threads' CUDA work is never blocked, with the
    latency option on too)."""
    if wait == "wait_value" and gpuio.gpu.stream_wait_selftest() != "works":
        pytest.skip(f"cuStreamWaitValue32 self-test: {gpuio.gpu.stream_wait_selftest()}")
    rc, out = run_child("--wait", wait, "--path", "event", "--stream-copy", "kernel", "--main", "all", "--seconds", "4")
    print(out)
    assert rc is not None, f"hang: the child did not finish in {TIMEOUT_S:g} s (wait={wait})\n{out[-6000:]}"
    assert rc == 0 and "ok reads=" in out, out[-4000:]
    assert int(out.split("ok reads=")[1].split()[0]) > 0, out
