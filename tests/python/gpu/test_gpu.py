"""GPU path tests: seeded random blocks into GPU buffers vs a host reference, writes from GPU read back,
CUDA-graph capture of the stream-ordered API, every copy method and wait mode, bad input, bounded waits.
Skipped, with the reason printed, where there is no CUDA layer or no GPU. Each test prints its name as it
starts and runs under a faulthandler watchdog: a hang dumps every thread's stack and ends the process
(TEST_GPU_TIMEOUT_S, default 60) instead of eating the GPU machine's call."""
import errno
import os
import sys

import numpy as np
import pytest

import gpuio
from gpu_util import skip_without_gpu, watchdog_fixture, why_no_gpu

torch = pytest.importorskip("torch")


_reason = why_no_gpu()
needs_gpu = skip_without_gpu(_reason)
BS = 4096


_watchdog = watchdog_fixture("test_gpu")
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def datafile(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu") / "data.bin"
    rng = np.random.default_rng(1234)
    data = rng.integers(0, 256, size=(2048, BS), dtype=np.uint8)
    data[:, :8] = np.arange(2048, dtype=np.int64).view(np.uint8).reshape(2048, 8)
    path.write_bytes(data.tobytes())
    return str(path), data


def _engine(path, **gpu):
    eng = gpuio.Engine(path, workers=2, staging_bytes=8 << 20)
    if gpu:
        eng.attach_gpu(**gpu)
    return eng


def test_empty_checks_its_arguments():
    with pytest.raises(ValueError, match="negative"):
        gpuio.empty((2, -1), device="cpu")
    with pytest.raises(ValueError, match="device='tpu'"):
        gpuio.empty(4, device="tpu")
    with pytest.raises(TypeError, match="shape"):
        gpuio.empty(object(), device="cpu")
    t = gpuio.empty((3, 5), "float32", device="cpu")
    assert t.shape == (3, 5) and t.dtype == torch.float32


@needs_gpu
@pytest.mark.parametrize("copy", ["batch", "kernel", "percopy"])
@pytest.mark.parametrize("wait", ["kernel", "wait_value"])
def test_random_blocks_into_gpu_match_host(datafile, copy, wait):
    path, data = datafile
    if wait == "wait_value" and gpuio.gpu.stream_wait_selftest() != "works":
        pytest.skip(f"cuStreamWaitValue32 self-test: {gpuio.gpu.stream_wait_selftest()}")
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"[test_gpu] copy={copy} wait={wait} seed={seed}", file=sys.stderr, flush=True)
    rng = np.random.default_rng(seed)
    with _engine(path, copy=copy, stream_wait=wait) as eng:
        for n in (1, 7, 16, 17, 300, 1500):
            ids = rng.integers(0, len(data), size=n, dtype=np.int64)
            ids[: n // 3] = np.arange(n // 3) + 100  # a contiguous run too
            out = gpuio.empty((n, BS), device="cuda")
            out.fill_(0xEE)  # poison: every byte must be written
            eng.read(torch.from_numpy(ids).cuda(), out)
            got = out.cpu().numpy()
            assert np.array_equal(got, data[ids]), f"seed={seed} n={n} copy={copy} wait={wait}"
        s = eng.stats()
        assert s["copy_mode"] == copy and s["stream_wait"] == wait
        assert "bounce->gpu" in s["data_path"] and s["gpu_stream_chunks"] >= 6


def test_hostfn_wait_is_refused_with_the_reason(tmp_path):
    """The host-function wait deadlocked on the H200 (a host function waited on copies CUDA does not order
    before it); the option is refused up front, on any build."""
    path = str(tmp_path / "h.bin")
    gpuio.Engine.create_file(path, 16 * BS)
    with gpuio.Engine(path, workers=1) as eng:
        with pytest.raises(ValueError, match="stream_wait='hostfn'.*removed"):
            eng.attach_gpu(stream_wait="hostfn")
        with pytest.raises(ValueError, match="wait_timeout_s.*-1"):
            eng.attach_gpu(wait_timeout_s=-1)


@needs_gpu
@pytest.mark.parametrize("wait", ["kernel", "wait_value"])
def test_stream_wait_is_bounded_and_names_the_request(datafile, wait):
    """A request stuck behind a long kernel: wait(timeout) raises ETIMEDOUT naming it, never hangs; once
    the stream moves on the same handle completes with the right data."""
    path, data = datafile
    if wait == "wait_value" and gpuio.gpu.stream_wait_selftest() != "works":
        pytest.skip(f"cuStreamWaitValue32 self-test: {gpuio.gpu.stream_wait_selftest()}")
    with _engine(path, stream_wait=wait) as eng:
        ids = torch.arange(40, 72, device="cuda")
        out = gpuio.empty((32, BS), device="cuda")
        eng.read(ids, out)  # attach + warm up
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            torch.cuda._sleep(int(3e9))  # ~1.5 s of GPU clock before the request is reached
            out.fill_(0)
            h = eng.read_async(ids, out)
        with pytest.raises(OSError, match="read of 32 blocks.*not complete after 0.2 s") as e:
            h.wait(timeout=0.2)
        assert e.value.errno == errno.ETIMEDOUT
        assert h.wait(timeout=30) is out
        assert np.array_equal(out.cpu().numpy(), data[40:72])


@needs_gpu
def test_host_ids_into_gpu_and_async_handle(datafile):
    path, data = datafile
    with _engine(path) as eng:
        ids = np.arange(50, 90, dtype=np.int64)
        out = gpuio.empty((len(ids), BS), device="cuda")
        h = eng.read_async(ids, out)
        assert type(h) is gpuio.Future  # the one future type, stream-ordered requests included
        assert h.wait() is out
        assert h.done()
        assert np.array_equal(out.cpu().numpy(), data[ids])
        assert eng.stats()["copy_choice"].startswith("measured")


@needs_gpu
def test_writes_from_gpu_read_back(tmp_path):
    path = str(tmp_path / "w.bin")
    gpuio.Engine.create_file(path, 512 * BS)
    rng = np.random.default_rng(7)
    with _engine(path) as eng:
        ids = rng.permutation(512)[:200].astype(np.int64)
        src = torch.from_numpy(rng.integers(0, 256, size=(200, BS), dtype=np.uint8)).cuda()
        eng.write(torch.from_numpy(ids).cuda(), src)
        torch.cuda.current_stream().synchronize()
        back = gpuio.aligned_empty(200 * BS)
        eng.read(ids, back)
        assert np.array_equal(back.reshape(200, BS), src.cpu().numpy())
        assert eng.stats()["gpu_stream_chunks"] > 0


@needs_gpu
def test_graph_capture_replays_fresh_requests(datafile):
    path, data = datafile
    with _engine(path) as eng:
        ids = torch.zeros(64, dtype=torch.int64, device="cuda")
        out = gpuio.empty((64, BS), device="cuda")
        eng.read(ids, out).__class__  # warm up outside capture (module load, first request)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            with torch.cuda.graph(g, stream=s):
                eng.read_async(ids, out)
        for start in (10, 500, 1900):
            ids.copy_(torch.arange(start, start + 64))
            out.fill_(0)
            g.replay()
            torch.cuda.synchronize()
            assert np.array_equal(out.cpu().numpy(), data[start:start + 64]), f"replay from block {start}"


@needs_gpu
def test_bad_blocks_raise_and_never_hang(datafile):
    path, data = datafile
    with _engine(path) as eng:
        out = gpuio.empty((2, BS), device="cuda")
        h = eng.read_async(torch.tensor([3, 999999], device="cuda"), out)
        with pytest.raises(IndexError, match="999999"):
            h.wait()
        with pytest.raises(ValueError, match="expected 8192"):
            eng.read(torch.tensor([1, 2], device="cuda"), gpuio.empty((3, BS), device="cuda"))
        with pytest.raises(TypeError, match="int64"):
            eng.read(torch.tensor([1, 2], device="cuda", dtype=torch.int32), out)
        # the engine still works afterwards
        eng.read(torch.tensor([5, 6], device="cuda"), out)
        assert np.array_equal(out.cpu().numpy(), data[[5, 6]])


@needs_gpu
def test_gpu_initiated_latency_probe(datafile):
    path, data = datafile
    with _engine(path) as eng:
        eng.read(torch.tensor([0], device="cuda"), gpuio.empty((1, BS), device="cuda"))  # attaches the layer
        dst = gpuio.empty((64, BS), device="cuda")
        ids = list(range(200, 264))
        ns = eng.gpu.latency_probe(ids, dst)
        assert len(ns) == 64 and all(t > 0 for t in ns)
        assert np.array_equal(dst.cpu().numpy(), data[200:264])
        # landed (the one-block latency path): the reads land in host-mapped memory and the requesting block
        # copies them itself;
        # 130 reads wrap the 64 slots twice, so a stale landing slot would show in the last 64
        copies = eng.stats()["gpu_copies"]
        ids = list(range(300, 430))
        ns, pub = eng.gpu.latency_probe(ids, dst, parts=True, landed=True)
        assert len(ns) == 130 and all(t > 0 for t in ns) and all(0 < p < t for p, t in zip(pub, ns))
        got = dst.cpu().numpy()
        for i in range(66, 130):
            assert np.array_equal(got[i % 64], data[ids[i]]), f"read {i} (block {ids[i]})"
        assert eng.stats()["gpu_copies"] == copies  # no staging->GPU copy by the engine


@needs_gpu
@pytest.mark.parametrize("wait", ["kernel", "wait_value"])
def test_requests_larger_than_the_bounce_pool_move_in_chunks(tmp_path, wait):
    """A 1 MiB bounce pool has 16 slots of 16 blocks: 600-block reads (host ids and GPU ids) and writes run
    as 38 chunks each, waiting for slots to come free, and every byte lands."""
    if wait == "wait_value" and gpuio.gpu.stream_wait_selftest() != "works":
        pytest.skip(f"cuStreamWaitValue32 self-test: {gpuio.gpu.stream_wait_selftest()}")
    path = str(tmp_path / "c.bin")
    gpuio.Engine.create_file(path, 1024 * BS)
    rng = np.random.default_rng(11)
    with _engine(path, stream_wait=wait, bounce_bytes=1 << 20) as eng:
        ids = rng.permutation(1024)[:600].astype(np.int64)
        src = torch.from_numpy(rng.integers(0, 256, size=(600, BS), dtype=np.uint8)).cuda()
        eng.write(torch.from_numpy(ids).cuda(), src)
        for host_ids in (True, False):
            out = gpuio.empty((600, BS), device="cuda")
            out.fill_(0xEE)
            eng.read(ids if host_ids else torch.from_numpy(ids).cuda(), out)
            assert torch.equal(out, src), f"host_ids={host_ids}"
        s = eng.stats()
        assert s["gpu_bounce_bytes"] == 16 * 16 * BS
        assert s["gpu_stream_chunks"] == 3 * 38 and s["gpu_stream_host_submits"] == 38
        assert s["gpu_bounce_waits"] > 0


def test_the_engine_owns_its_gpu_path(datafile):
    """engine.gpu is the engine's one GPU path (created once); attach_gpu after it exists is refused. Without
    the CUDA layer both raise RuntimeError saying why (this part runs in CI)."""
    path, _ = datafile
    with gpuio.Engine(path, workers=1) as eng:
        if _reason is not None:
            with pytest.raises(RuntimeError, match="CUDA|cuda|GPU|device"):
                eng.gpu
            with pytest.raises(RuntimeError, match="CUDA|cuda|GPU|device"):
                eng.attach_gpu(queues=2)
            return
        assert eng.gpu is eng.gpu and eng.gpu.engine is eng
        with pytest.raises(ValueError, match="already has its GPU path"):
            eng.attach_gpu(queues=2)


@needs_gpu
def test_bounce_option_is_checked(datafile):
    path, _ = datafile
    with gpuio.Engine(path, workers=1) as eng:
        with pytest.raises(ValueError, match=r"bounce_bytes=4096 must lie in \[1048576, "):
            eng.attach_gpu(bounce_bytes=4096)


@needs_gpu
def test_host_buffer_rows_gathered_in_place_by_the_gpu():
    """The constant host buffer's rows reach the GPU through a CUDA view of the pinned buffer (a gather kernel
    reading over PCIe), equal to the CPU gather; the view is a view (no copy of the buffer), unpinned memory is
    refused (None, so the CPU gathers), and a second thread launching CUDA work meanwhile changes nothing."""
    import threading

    from gpuio.cache.host_buffer import HostBuffer
    from gpuio.gpu import mapped_view

    class Table:  # the row-table contract HostBuffer fills itself from
        def __init__(self, t):
            self.t, self.shape, self.torch_dtype = t, tuple(t.shape), t.dtype

        def gather(self, idx):
            return self.t[idx]

    g = torch.Generator().manual_seed(7)
    table = torch.randn(5000, 96, generator=g).to(torch.float16)
    held = torch.randperm(5000, generator=g)[:3000].sort().values
    hb = HostBuffer(Table(table), held, 5000, "cuda")
    assert hb.data.is_pinned()
    view = mapped_view(hb.data, "cuda")
    assert view is not None and view.is_cuda and view.data_ptr() != 0 and view.shape == hb.data.shape
    hb.data[17, 3] = 1.5  # a view: the host write is what the GPU reads
    assert float(view[17, 3].item()) == 1.5
    assert mapped_view(torch.zeros(8), "cuda") is None  # not pinned: refused, not wrong

    stop = threading.Event()

    def other_cuda_work():
        x = torch.randn(256, 256, device="cuda")
        while not stop.is_set():
            x = (x @ x).tanh_()
            torch.cuda.synchronize()

    t = threading.Thread(target=other_cuda_work)
    t.start()
    try:
        for trial in range(20):
            slots = torch.randint(0, 3000, (4096,), generator=g)
            got = hb.read(slots.cuda(), "cuda")
            assert got.is_cuda and torch.equal(got.cpu(), hb.data[slots]), f"trial {trial}"
    finally:
        stop.set()
        t.join()
    assert torch.equal(hb.read(torch.tensor([0, 2999]), "cpu"), hb.data[[0, 2999]])


@needs_gpu
def test_pinned_empty_pins_exactly_its_size_and_outlives_its_name():
    """gpuio.cache.host_buffer.pinned_empty: page-locked (torch sees it pinned, mapped_view works), and the registration lives
    as long as a view of the memory does (torch's pin_memory would have pinned 16 MiB for these 9 MB)."""
    import gc

    import torch

    from gpuio.cache.host_buffer import pinned_empty
    from gpuio.gpu import mapped_view

    t = pinned_empty((3, 750_001), torch.float32)
    assert t.shape == (3, 750_001) and t.dtype == torch.float32 and t.is_pinned() and t.is_contiguous()
    assert t.untyped_storage().nbytes() < 9_004_097  # exactly the rows (+ < one page of alignment), not 2^24
    t.copy_(torch.arange(t.numel(), dtype=torch.float32).view(t.shape))
    row = t[2]
    del t
    gc.collect()
    assert row.is_pinned()  # a view keeps the pages registered
    on_gpu = row.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    assert torch.equal(on_gpu.cpu(), torch.arange(1_500_002, 2_250_003, dtype=torch.float32))
    assert mapped_view(row, "cuda") is not None


@needs_gpu
def test_one_block_handle_event_orders_other_streams(datafile):
    """The latency path (one block, host ids): the handle's completion event is recorded in C++; .event (a
    torch.cuda.Event made on first use) is not complete while the stream is held before the request, and
    another stream that waits on it sees the data."""
    path, data = datafile
    with _engine(path) as eng:
        out = gpuio.empty((1, BS), device="cuda")
        eng.read([7], out)  # attach + warm up; a one-element list takes the ids fast path
        assert np.array_equal(out.cpu().numpy(), data[[7]])
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            torch.cuda._sleep(int(5e8))  # the stream reaches the request only after this kernel
            h = eng.read_async(np.array([42], dtype=np.int64), out)
        ev = h.event
        assert isinstance(ev, torch.cuda.Event) and h.event is ev
        assert not ev.query() and not h.done()
        other = torch.cuda.Stream()
        other.wait_event(ev)
        with torch.cuda.stream(other):
            got = out.clone()
        assert h.wait(timeout=30) is out and h.done() and ev.query()
        other.synchronize()
        assert np.array_equal(got.cpu().numpy(), data[[42]])


@needs_gpu
def test_many_handles_alive_and_handles_outliving_the_engine(datafile):
    """More handles alive than the completion-event pool holds (it grows), all correct; a handle dropped after
    its engine closed returns its event safely."""
    path, data = datafile
    eng = _engine(path)
    ids = np.random.default_rng(3).integers(0, 2048, 150)
    outs = [gpuio.empty((1, BS), device="cuda") for _ in ids]
    hs = [eng.read_async(np.array([b], dtype=np.int64), o) for b, o in zip(ids, outs)]
    for h in hs:
        h.wait()
    for b, o in zip(ids, outs):
        assert np.array_equal(o.cpu().numpy(), data[[b]])
    last = hs[-1]
    del hs
    eng.close()
    assert last.done()
    del last


@needs_gpu
def test_refused_tensors_are_named_like_before(datafile):
    """Tensors reach the binding as DLPack capsules; a refused one still gets the one-line reason naming it."""
    path, _ = datafile
    with _engine(path) as eng:
        wide = gpuio.empty((2, 2 * BS), device="cuda")
        with pytest.raises(ValueError, match="out must be contiguous"):
            eng.read(torch.tensor([1, 2], device="cuda"), wide[:, :BS])
        with pytest.raises(ValueError, match="expected 4096"):
            eng.read(np.array([1], dtype=np.int64), wide)
        with pytest.raises(IndexError, match="999999"):
            eng.read(np.array([999999], dtype=np.int64), gpuio.empty((1, BS), device="cuda"))


@needs_gpu
@pytest.mark.parametrize("wait", ["kernel", "wait_value"])
def test_stream_copy_kernel_lands_every_byte(datafile, wait):
    """stream_copy=kernel (the one-block latency option): chunks up to 64 KiB reach GPU memory by one warp reading
    the host-mapped bounce slot (fused with the wait kernel in stream_wait=kernel), larger ones by copy engine;
    host and GPU ids, an odd destination offset (the byte-wise copy), every byte written."""
    path, data = datafile
    if wait == "wait_value" and gpuio.gpu.stream_wait_selftest() != "works":
        pytest.skip(f"cuStreamWaitValue32 self-test: {gpuio.gpu.stream_wait_selftest()}")
    rng = np.random.default_rng(21)
    with _engine(path, stream_wait=wait, stream_copy="kernel") as eng:
        for n in (1, 1, 7, 16, 17, 300):
            for cuda_ids in (False, True):
                ids = rng.integers(0, len(data), size=n, dtype=np.int64)
                out = gpuio.empty((n, BS), device="cuda")
                out.fill_(0xEE)
                h = eng.read_async(torch.from_numpy(ids).cuda() if cuda_ids else ids, out)
                assert h.wait() is out
                assert np.array_equal(out.cpu().numpy(), data[ids]), f"n={n} cuda_ids={cuda_ids}"
        raw = gpuio.empty(BS + 1, device="cuda")
        raw.fill_(0xEE)
        eng.read([33], raw[1:])  # 1 byte off 16-byte alignment
        torch.cuda.synchronize()
        assert np.array_equal(raw[1:].cpu().numpy(), data[33]) and int(raw[0]) == 0xEE
        assert eng.stats()["stream_copy"] == "kernel"


@needs_gpu
def test_stream_copy_option_is_checked(datafile):
    path, _ = datafile
    with gpuio.Engine(path, workers=1) as eng:
        with pytest.raises(ValueError, match="stream_copy='fast' is not one of engine, kernel"):
            eng.attach_gpu(stream_copy="fast")


@needs_gpu
def test_tensors_dlpack_cannot_carry_are_refused_by_name(datafile):
    path, _ = datafile
    with _engine(path) as eng:
        sparse = torch.zeros((1, BS), device="cuda").to_sparse()
        with pytest.raises((TypeError, ValueError), match="out"):
            eng.read(np.array([1], dtype=np.int64), sparse)


@needs_gpu
def test_first_cuda_reads_from_eight_threads_at_once(datafile):
    """Eight threads whose first requests into CUDA memory reach a fresh engine together get one GPU path and
    their blocks bit for bit (two GPU paths made at once registered the staging twice with CUDA, or hung)."""
    import threading

    path, data = datafile
    eng = gpuio.Engine(path, workers=2)
    start, errors, got = threading.Barrier(8), [], {}

    def reader(k):
        try:
            ids = np.arange(k * 64, k * 64 + 64, dtype=np.int64)
            out = torch.empty(64 * BS, dtype=torch.uint8, device="cuda")
            start.wait()
            eng.read(ids, out)
            torch.cuda.current_stream().synchronize()
            got[k] = (out.cpu().numpy(), eng.gpu)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors
        assert len({id(g) for _, g in got.values()}) == 1 and len(got) == 8
        for k, (b, _) in got.items():
            assert np.array_equal(b, data[k * 64:k * 64 + 64].reshape(-1)), k
    finally:
        eng.close()
