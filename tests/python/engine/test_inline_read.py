"""Engine.read of one small contiguous run is done by the calling thread (engine/inline_read.cpp): from the page
cache where it holds the run, else one O_DIRECT read. These check that what it returns is the file's bytes in every
case, that it counts itself, and that what it must not take (several runs, unaligned memory, closed files, backends
without it) still reads right through the workers."""
from __future__ import annotations

import os

import numpy as np
import pytest

import gpuio
from gpuio.engine import Engine

BS = 4096
BLOCKS = 64


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "d.bin"
    data = np.random.default_rng(1).integers(0, 256, BLOCKS * BS, dtype=np.uint8)
    data.tofile(path)
    return str(path), data


def _engine(path, **kw):
    try:
        return Engine(path, workers=1, **kw)
    except OSError as e:  # a file system without O_DIRECT
        pytest.skip(f"O_DIRECT engine on {path}: {e}")


def _drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_one_block_read_inline_from_the_device(data_file):
    path, data = data_file
    _drop_cache(path)
    with _engine(path) as e:
        out = gpuio.aligned_empty(BS)
        for b in (0, 17, BLOCKS - 1):
            e.read([b], out)
            assert np.array_equal(out, data[b * BS:(b + 1) * BS])
        s = e.stats()
        assert s["inline_ops"] == 3 and s["batches"] == 0  # no batch: no worker took part


def test_contiguous_run_inline_and_several_runs_through_workers(data_file):
    path, data = data_file
    with _engine(path) as e:
        out = gpuio.aligned_empty(4 * BS)
        e.read(np.arange(8, 12, dtype=np.int64), out)
        assert np.array_equal(out, data[8 * BS:12 * BS])
        assert e.stats()["inline_ops"] == 1
        ids = np.array([3, 40, 41, 9], dtype=np.int64)  # three runs: the workers overlap them
        e.read(ids, out)
        assert np.array_equal(out.reshape(4, BS), data.reshape(BLOCKS, BS)[ids])
        s = e.stats()
        assert s["inline_ops"] == 1 and s["batches"] == 1


def test_page_cache_copy_sees_what_the_engine_wrote(data_file):
    path, data = data_file
    with open(path, "rb") as f:
        f.read()  # the whole file in the page cache
    with _engine(path) as e:
        out = gpuio.aligned_empty(BS)
        e.read([5], out)
        assert np.array_equal(out, data[5 * BS:6 * BS])
        if e.stats()["inline_cached_ops"] == 0:
            pytest.skip("no cachestat(2) here (Linux < 6.5): every inline read goes to the device")
        new = np.full(BS, 0x5A, dtype=np.uint8)
        e.write([5], new)  # O_DIRECT: the cached page is dropped, so a cached copy would be stale
        with open(path, "rb") as f:
            f.read()  # cached again, now with the new bytes
        e.read([5], out)
        assert np.array_equal(out, new)


def test_unaligned_memory_and_non_inline_backends_still_read_right(data_file):
    path, data = data_file
    with _engine(path) as e:
        raw = np.empty(BS + 1, dtype=np.uint8)
        out = raw[1:]  # not O_DIRECT-aligned: the workers stage it
        e.read([7], out)
        assert np.array_equal(out, data[7 * BS:8 * BS])
        assert e.stats()["inline_ops"] == 0
    with Engine(path, workers=1, backend="posix", direct=False) as e:  # buffered: read_now with the one fd
        out = gpuio.aligned_empty(BS)
        e.read([2], out)
        assert np.array_equal(out, data[2 * BS:3 * BS]) and e.stats()["inline_ops"] == 1
    with Engine(path, workers=1, backend="fault:uring", fault=dict(eio_rate=0.0)) as e:  # no read_now: the workers
        out = gpuio.aligned_empty(BS)
        e.read([2], out)
        assert np.array_equal(out, data[2 * BS:3 * BS]) and e.stats()["inline_ops"] == 0


def test_closed_target_and_bad_ids_refused(data_file):
    path, _ = data_file
    e = Engine(None, workers=1)
    try:
        t = e.open_target(path, direct=False, writable=False)
        out = gpuio.aligned_empty(BS)
        t.read([1], out)
        base = t.base_block
        t.close()
        with pytest.raises(IndexError):
            e.read([base + 1], out)
        with pytest.raises(IndexError):
            e.read([-1], out)
    finally:
        e.close()
