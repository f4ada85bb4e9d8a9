"""gpuio.Engine's Python API: seeded write/read-back integrity against a
NumPy model over 1 and 3 striped files, and every bad input the issue names, each raising the documented
exception type with a message that names the offending value."""
from __future__ import annotations

import errno
import os
import subprocess
import time

import numpy as np
import pytest

import gpuio
from gpuio import aligned_empty

BS = 4096


def make_files(tmp_path, n, nbytes, tag=0):
    """n files of seeded random bytes (real data); returns (paths, list of their contents)."""
    paths, contents = [], []
    for i in range(n):
        data = np.frombuffer(np.random.default_rng(1000 * tag + i).bytes(nbytes), np.uint8).copy()
        p = tmp_path / f"dev{i}.bin"
        p.write_bytes(data.tobytes())
        paths.append(str(p))
        contents.append(data)
    return paths, contents


def model_map(block, ndev, stripe_bytes, bs=BS):
    """RAID-0 as documented: stripe unit stripe_bytes, stripes dealt round-robin over the devices."""
    if ndev == 1:
        return 0, block * bs
    per = stripe_bytes // bs
    stripe, within = divmod(block, per)
    return stripe % ndev, (stripe // ndev) * stripe_bytes + within * bs


@pytest.mark.parametrize("ndev,stripe_bytes,backend", [(1, 65536, "uring"), (3, 65536, "uring"),
                                                       (3, 16384, "posix"), (1, 65536, "posix")])
@pytest.mark.parametrize("seed", [11, 12])
def test_random_write_read_back_matches_numpy(tmp_path, ndev, stripe_bytes, backend, seed):
    rng = np.random.default_rng(seed)
    file_bytes = 1 << 20
    paths, contents = make_files(tmp_path, ndev, file_bytes, tag=seed)
    try:
        with gpuio.Engine(paths, stripe_bytes=stripe_bytes, backend=backend, workers=2) as eng:
            total = eng.total_blocks
            assert total == ndev * file_bytes // BS
            # The model starts from the files' contents as placed by the documented layout.
            model = np.empty((total, BS), np.uint8)
            for b in range(total):
                d, off = model_map(b, ndev, stripe_bytes)
                model[b] = contents[d][off:off + BS]
            for round_ in range(6):
                n = int(rng.integers(1, total // 2))
                blocks = rng.choice(total, n, replace=False).astype(np.int64)  # distinct: order is not defined
                if round_ % 2:
                    blocks.sort()  # contiguous runs get merged: exercise that path too
                src = aligned_empty(n * BS) if round_ % 3 else np.empty(n * BS + 1, np.uint8)[1:]  # staged path
                src[:] = np.frombuffer(rng.bytes(n * BS), np.uint8)
                eng.write(blocks, src)
                model[blocks] = src.reshape(n, BS)
                want = rng.integers(0, total, int(rng.integers(1, total)), dtype=np.int64)  # repeats allowed
                out = aligned_empty(len(want) * BS) if round_ % 2 else np.empty(len(want) * BS + 3, np.uint8)[3:]
                eng.read(want, out)
                bad = np.flatnonzero((out.reshape(-1, BS) != model[want]).any(axis=1))
                assert bad.size == 0, f"seed={seed}: blocks {want[bad[:5]].tolist()} read back wrong"
        # On the devices themselves, every block sits where the layout says.
        disk = [np.fromfile(p, np.uint8) for p in paths]
        for b in range(total):
            d, off = model_map(b, ndev, stripe_bytes)
            assert np.array_equal(disk[d][off:off + BS], model[b]), f"seed={seed}: block {b} misplaced on device {d}"
    except AssertionError:
        print(f"test_random_write_read_back_matches_numpy failed with seed={seed}")
        raise


@pytest.fixture
def eng(tmp_path):
    paths, _ = make_files(tmp_path, 1, 256 * BS)
    with gpuio.Engine(paths[0], workers=1) as e:
        yield e


def test_out_of_range_block_names_it(eng):
    out = aligned_empty(2 * BS)
    with pytest.raises(IndexError, match=r"\b256\b"):
        eng.read(np.array([0, 256], np.int64), out)
    with pytest.raises(IndexError, match=r"-1\b"):
        eng.read(np.array([-1, 0], np.int64), out)


def test_wrong_buffer_size(eng):
    with pytest.raises(ValueError, match=str(3 * BS - 1)):
        eng.read(np.arange(3, dtype=np.int64), np.empty(3 * BS - 1, np.uint8))


def test_wrong_blocks_dtype(eng):
    # Any integer dtype is an id (one rule, gpuio._index.check_ids); floats and bools never are.
    a, b = aligned_empty(2 * BS), aligned_empty(2 * BS)
    eng.read(np.arange(2, dtype=np.int32), a)
    eng.read(np.arange(2, dtype=np.int64), b)
    assert np.array_equal(a, b)
    with pytest.raises(TypeError, match="float64"):
        eng.read(np.arange(2, dtype=np.float64), aligned_empty(2 * BS))
    with pytest.raises(TypeError, match="bool"):
        eng.read(np.ones(2, dtype=bool), aligned_empty(2 * BS))


def test_non_contiguous_buffer(eng):
    strided = np.empty(4 * BS, np.uint8)[::2]
    assert strided.nbytes == 2 * BS
    with pytest.raises(ValueError, match="contiguous"):
        eng.read(np.arange(2, dtype=np.int64), strided)


def test_closed_engine(tmp_path):
    paths, _ = make_files(tmp_path, 1, 16 * BS)
    e = gpuio.Engine(paths)
    e.close()
    e.close()  # idempotent
    assert e.closed
    with pytest.raises(ValueError, match="closed"):
        e.read(np.arange(1, dtype=np.int64), aligned_empty(BS))
    with pytest.raises(ValueError, match="closed"):
        e.write_async(np.arange(1, dtype=np.int64), aligned_empty(BS))


def test_unreadable_path_names_it(tmp_path):
    missing = str(tmp_path / "no-such-file.bin")
    with pytest.raises(OSError, match="no-such-file.bin") as ei:
        gpuio.Engine(missing)
    assert ei.value.errno == errno.ENOENT
    with pytest.raises(OSError, match=str(tmp_path)):
        gpuio.Engine(str(tmp_path))  # a directory is not a device


def _mount_ramfs(where):
    """ramfs has no direct I/O: O_DIRECT opens fail with EINVAL. Needs root (mount)."""
    if os.geteuid() != 0:
        return "mounting ramfs needs root"
    r = subprocess.run(["mount", "-t", "ramfs", "ramfs", str(where)], capture_output=True, text=True)
    return None if r.returncode == 0 else f"mount -t ramfs failed: {r.stderr.strip()}"


def test_odirect_unsupported_suggests_direct_false(tmp_path):
    where = tmp_path / "ramfs"
    where.mkdir()
    why = _mount_ramfs(where)
    if why:
        print(f"skipping: {why}")
        pytest.skip(why)
    try:
        p = where / "data.bin"
        p.write_bytes(np.arange(8 * BS, dtype=np.uint8).tobytes())
        with pytest.raises(OSError, match="direct=False") as ei:
            gpuio.Engine(str(p))
        assert str(p) in str(ei.value)
        with gpuio.Engine(str(p), direct=False) as e:  # the suggested way works
            out = np.empty(BS, np.uint8)
            e.read(np.array([1], np.int64), out)
            assert np.array_equal(out, np.arange(8 * BS, dtype=np.uint8)[BS:2 * BS])
            assert "pagecache" in e.stats()["data_path"]
        del e  # the engine holds its files open until it is destroyed; umount needs them closed
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=False)


def test_async_handles(eng):
    rng = np.random.default_rng(5)
    src = aligned_empty(8 * BS)
    src[:] = np.frombuffer(rng.bytes(8 * BS), np.uint8)
    blocks = np.arange(8, 16, dtype=np.int64)
    h = eng.write_async(blocks, src)
    assert h.wait() is src
    assert h.done()
    out = aligned_empty(8 * BS)
    h = eng.read_async(blocks, out)
    assert isinstance(h.done(), bool)
    assert h.wait(timeout=30) is out
    assert h.done()
    assert np.array_equal(out, src)


def test_stats_keys(eng):
    eng.read(np.arange(4, dtype=np.int64), aligned_empty(4 * BS))
    s = eng.stats()
    for key in ("ops", "bytes", "busy_worker_seconds", "worker_cpu_seconds", "active_workers", "data_path", "backend"):
        assert key in s, key
    assert s["bytes"] >= 4 * BS and s["ops"] >= 1
    assert s["active_workers"] >= 1
    assert s["data_path"] == "uring+direct"


def test_context_manager_closes(tmp_path):
    paths, _ = make_files(tmp_path, 1, 16 * BS)
    with gpuio.Engine(paths) as e:
        assert not e.closed
    assert e.closed


def test_create_file(tmp_path):
    p = tmp_path / "new.bin"
    gpuio.Engine.create_file(p, 64 * BS)
    assert p.stat().st_size == 64 * BS
    with gpuio.Engine(p) as e:
        assert e.total_blocks == 64
        src = aligned_empty(2 * BS)
        src[:] = 7
        e.write(np.array([62, 63], np.int64), src)
        out = aligned_empty(2 * BS)
        e.read(np.array([62, 63], np.int64), out)
        assert (out == 7).all()
    with pytest.raises(ValueError, match="-5"):
        gpuio.Engine.create_file(p, -5)


def test_torch_cpu_tensors(eng):
    torch = pytest.importorskip("torch")
    blocks = torch.tensor([3, 1, 2], dtype=torch.int64)
    src = torch.arange(3 * BS, dtype=torch.int32).to(torch.uint8)
    eng.write(blocks, src)
    out = torch.empty(3 * BS // 4, dtype=torch.float32)  # any dtype: bytes are bytes
    assert eng.read(blocks, out) is out
    assert torch.equal(out.view(torch.uint8), src)
    again = eng.read(blocks.to(torch.int32), torch.empty_like(out))  # any integer dtype is an id
    assert torch.equal(again.view(torch.uint8), src)
    with pytest.raises(TypeError, match="float"):
        eng.read(blocks.to(torch.float64), out)
    with pytest.raises(ValueError, match="contiguous"):
        eng.read(blocks, torch.empty(3 * BS // 2, 2, dtype=torch.float32).t())


def test_fault_backend_eio_names_block(tmp_path):
    paths, _ = make_files(tmp_path, 1, 64 * BS)
    with gpuio.Engine(paths, backend="fault:uring", fault=dict(seed=3, eio_rate=1.0)) as e:
        with pytest.raises(OSError) as ei:
            e.read(np.array([17], np.int64), aligned_empty(BS))
        assert ei.value.errno == errno.EIO
        assert "block 17" in str(ei.value)
    with pytest.raises(ValueError, match="fault"):
        gpuio.Engine(paths, backend="uring", fault=dict(seed=1))


def test_busy_seconds_include_the_running_stretch(tmp_path):
    """Busy time used to be added only when a worker went to sleep: a worker busy for the whole pass reported none
    of it. The read is held back by the fault layer; two snapshots taken while it is in flight (the worker is
    waiting for its completion, and cannot sleep before it comes) must show busy time growing. Where the read did
    not outlive the pair (a stalled box), that proves nothing either way: it is taken again with a longer hold."""
    paths, _ = make_files(tmp_path, 1, 64 * BS)
    for hold_us in (300_000, 3_000_000, 30_000_000):
        with gpuio.Engine(paths, backend="fault:uring", workers=1,
                          fault=dict(seed=1, latency_rate=1.0, latency_us=hold_us)) as e:
            waits = e.stats()["block_waits"]
            h = e.read_async(np.array([3], np.int64), aligned_empty(BS))
            for _ in range(60_000):  # the worker waits for the read's completion (bounded: 60 s)
                if e.stats()["block_waits"] > waits:
                    break
                time.sleep(0.001)
            else:
                pytest.fail("the worker never waited for the read")
            first = e.stats()["busy_worker_seconds"]
            time.sleep(0.001)
            second = e.stats()["busy_worker_seconds"]
            in_flight = not h.done()
            h.wait()
        if in_flight:
            assert second > first, f"busy_worker_seconds stayed at {first} while the worker held a read"
            return
    pytest.fail("the read completed before the second snapshot, even when held 30 s")


def test_engine_left_open_at_exit_is_closed_cleanly(tmp_path):
    """A script that never closes its engine (busy workers, batches in flight) still exits 0, silently."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import numpy as np, gpuio
        gpuio.Engine.create_file({str(tmp_path / 'x.bin')!r}, 8 << 20)
        eng = gpuio.Engine({str(tmp_path / 'x.bin')!r}, workers=2)
        out = np.empty(512 * 4096, np.uint8)
        handles = [eng.read_async(np.arange(512, dtype=np.int64), out) for _ in range(4)]
        print("submitted")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "submitted" in r.stdout
    assert "terminate" not in r.stderr and "gpuio:" not in r.stderr, r.stderr


def test_wait_any_returns_a_finished_batch_and_refuses_bad_lists(tmp_path):
    paths, contents = make_files(tmp_path, 1, 64 * BS)
    with gpuio.Engine(paths[0], workers=1) as e, gpuio.Engine(paths[0], workers=1) as other:
        outs = [aligned_empty(4 * BS) for _ in range(4)]
        hs = [e.read_async(np.arange(4 * i, 4 * i + 4, dtype=np.int64), outs[i]) for i in range(4)]
        seen = set()
        left = list(range(4))
        while left:  # every batch comes out exactly once, each done when named
            k = e.wait_any([hs[j] for j in left])
            assert hs[left[k]].done()
            seen.add(left.pop(k))
        assert seen == {0, 1, 2, 3}
        for i in range(4):
            assert hs[i].wait() is outs[i]
            assert np.array_equal(outs[i], contents[0][16 * i * 1024:16 * (i + 1) * 1024])
        with pytest.raises(ValueError, match="empty list"):
            e.wait_any([])
        with pytest.raises(TypeError, match=r"futures\[1\] must be a gpuio.Future"):
            e.wait_any([hs[0], 7])
        h2 = other.read_async(np.arange(2, dtype=np.int64), aligned_empty(2 * BS))
        with pytest.raises(ValueError, match="another engine"):
            e.wait_any([hs[0], h2])
        h2.wait()


def test_wait_any_names_a_failed_batch_and_times_out(tmp_path):
    paths, _ = make_files(tmp_path, 1, 64 * BS)
    with gpuio.Engine(paths, backend="fault:uring", fault=dict(seed=3, eio_rate=1.0)) as e:
        h = e.read_async(np.array([9], np.int64), aligned_empty(BS))
        assert e.wait_any([h]) == 0  # a failed batch is finished too; its wait() raises
        with pytest.raises(OSError) as ei:
            h.wait()
        assert ei.value.errno == errno.EIO and "block 9" in str(ei.value)
    with gpuio.Engine(paths, backend="fault:uring", fault=dict(seed=3, latency_rate=1.0, latency_us=400000)) as e:
        h = e.read_async(np.array([1], np.int64), aligned_empty(BS))
        with pytest.raises(OSError) as ei:
            e.wait_any([h], timeout=0.05)
        assert ei.value.errno == errno.ETIMEDOUT and "none of 1 batches" in str(ei.value)
        h.wait()


def test_gpu_path_made_once_by_threads_asking_at_once(eng, monkeypatch):
    """Engine.gpu from 8 threads at once (a loader's readers' first requests into CUDA memory) makes one GPU
    path: two made together registered the engine's staging twice with CUDA (cudaErrorHostMemoryAlreadyRegistered).
    The CUDA layer is replaced by a slow stand-in here so that the threads overlap on any machine; the GPU check
    runs the real one (tests/python/gpu/test_gpu.py: 8 threads' first reads into CUDA memory)."""
    import threading

    import gpuio.gpu as gpu_mod

    made = []

    class SlowRuntime:
        def __init__(self, engine, **options):
            time.sleep(0.05)
            made.append(self)

    monkeypatch.setattr(gpu_mod, "GpuRuntime", SlowRuntime)
    monkeypatch.setattr(gpu_mod, "refuse_bad_fork", lambda: None)
    start = threading.Barrier(8)
    got = []

    def ask():
        start.wait()
        got.append(eng.gpu)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(made) == 1 and len(got) == 8 and all(g is made[0] for g in got), (len(made), len(got))
    with pytest.raises(ValueError, match="already has its GPU path"):
        eng.attach_gpu()
    eng._gpu = None  # the stand-in has no close() for the fixture's engine.close()
