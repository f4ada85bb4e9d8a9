"""The C++ plan reader (gpuio/plan_reader.hpp, gpuio._core.read_plan) on the CPU: planned segments at any offset
and length land in host destinations at any address, cold (O_DIRECT pieces through the ring, many in flight),
warm (RWF_NOWAIT copies from the page cache) and claimed resident but evicted (the rest by O_DIRECT); bad plans
refused naming the value; a read that fails (the file truncated under the plan) raises OSError naming the file
and the offset, and the next read works; the ring comes from the process's one pinned pool and goes back to it."""
from __future__ import annotations

import os

import numpy as np
import pytest

from gpuio import _core


def _file(tmp_path, nbytes: int, seed: int = 0):
    data = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)
    p = tmp_path / "f.bin"
    p.write_bytes(data.tobytes())
    return str(p), data


def _evict(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _segments(size: int, seed: int, resident: int):
    """Segments back to back with holes, odd offsets and lengths (1 byte to ~3 MiB), the last in the file's
    partial last block; each with a destination of its own at an odd address."""
    rng = np.random.default_rng(seed)
    rows, dests, at = [], [], int(rng.integers(0, 5000))
    while at < size:
        n = int(min(size - at, rng.choice([1, 7, 4096, 5000, 300_000, 3 << 20])))
        if rng.random() < 0.8:
            buf = np.zeros(n + 64, dtype=np.uint8)
            shift = int(rng.integers(0, 64))
            dests.append((at, buf[shift:shift + n]))
            rows.append((at, n, buf[shift:].ctypes.data, resident))
        at += n + int(rng.choice([0, 0, 3, 4096, 10_000]))
    return np.array(rows, dtype=np.int64).reshape(-1, 4), dests


def _check(data, dests) -> None:
    for off, d in dests:
        assert np.array_equal(d, data[off:off + len(d)]), off


@pytest.mark.parametrize("regime", ["cold", "warm", "evicted"])
def test_segments_land_at_any_address(tmp_path, regime):
    size = (11 << 20) + 1234
    path, data = _file(tmp_path, size)
    seg, dests = _segments(size, 1, 0 if regime == "cold" else 1)
    if regime != "warm":
        _evict(path)
    st = _core.read_plan(path, size, seg, piece_bytes=256 << 10, pieces=8)
    _check(data, dests)
    assert st["bytes"] == int(seg[:, 1].sum()) == st["pagecache_bytes"] + st["direct_bytes"] + st["buffered_bytes"]
    if regime == "warm":
        if st["pagecache_bytes"] < st["bytes"]:
            pytest.skip("the page cache did not keep the file")
        assert st["direct_bytes"] == 0
    elif st["direct"]:  # O_DIRECT where the file system takes it (not tmpfs)
        assert st["direct_bytes"] > 0 and st["disk_read_bytes"] % 4096 == 0 and st["inflight_max"] > 1, st
        assert st["pagecache_bytes"] < st["bytes"], st


@pytest.mark.parametrize("lo,hi,size", [
    (0, 3 << 20, 8 << 20),                 # whole blocks, not a multiple of the piece
    (100, (1 << 20) + 5, 8 << 20),         # unaligned at both ends
    ((1 << 20) + 8, (1 << 20) + 5000, (1 << 20) + 5000),  # ends in the file's partial last block
    ((1 << 20) + 4100, (1 << 20) + 5000, (1 << 20) + 5000),  # wholly inside the partial last block
    (4096, 8192, 8192),                     # one whole block, the file's last
])
def test_ring_pieces_cover_the_segment_once_in_whole_blocks(tmp_path, lo, hi, size):
    """One segment, cold, through a ring of two 512 KiB pieces: O_DIRECT reads whole blocks from the block holding
    its first byte to the end of its last block or of the file's last whole block, whichever is first (nothing past
    it by O_DIRECT), at most a piece each; the rest (the file's partial last block) by pread: every byte of the
    segment exactly once, into a destination at an odd address."""
    path, data = _file(tmp_path, size, 6)
    _evict(path)
    piece = 512 << 10
    buf = np.zeros(hi - lo + 3, dtype=np.uint8)
    out = buf[3:]
    st = _core.read_plan(path, size, np.array([(lo, hi - lo, out.ctypes.data, 0)], dtype=np.int64),
                         piece_bytes=piece, pieces=2)
    assert np.array_equal(out, data[lo:hi]) and not buf[:3].any()
    if not st["direct"]:
        pytest.skip("no O_DIRECT on this file system")
    last_whole = size // 4096 * 4096
    disk = max(0, min(-(-hi // 4096) * 4096, last_whole) - lo // 4096 * 4096)
    tail = max(0, hi - max(lo, last_whole))
    assert st["disk_read_bytes"] == disk and st["buffered_bytes"] == tail, st
    assert st["direct_bytes"] + st["buffered_bytes"] == hi - lo and st["pagecache_bytes"] == 0, st
    assert st["pieces"] == -(-disk // piece) and st["inflight_max"] <= 2, st


def test_plain_preads_when_direct_is_off(tmp_path):
    size = (3 << 20) + 99
    path, data = _file(tmp_path, size, 2)
    seg, dests = _segments(size, 2, 0)
    st = _core.read_plan(path, size, seg, direct=False)
    _check(data, dests)
    assert st["buffered_bytes"] == st["bytes"] and st["direct"] is False


@pytest.mark.parametrize("rows, message", [
    ([(0, 10, 1, 0), (5, 10, 1, 0)], "overlaps or precedes"),
    ([(100, 10_000, 1, 0)], "past the file's"),
    ([(0, 10, 0, 0)], "has no destination"),
])
def test_bad_plans_refused(tmp_path, rows, message):
    path, _ = _file(tmp_path, 8192)
    with pytest.raises(ValueError, match=message):
        _core.read_plan(path, 8192, np.array(rows, dtype=np.int64))
    with pytest.raises(ValueError, match="piece_bytes=1000"):
        _core.read_plan(path, 8192, np.zeros((0, 4), dtype=np.int64), piece_bytes=1000)


def test_a_failed_read_names_the_file_and_offset(tmp_path):
    size = 4 << 20
    path, data = _file(tmp_path, size, 3)
    out = np.zeros(size, dtype=np.uint8)
    seg = np.array([(0, size, out.ctypes.data, 0)], dtype=np.int64)
    os.truncate(path, 1 << 20)  # the plan was made for 4 MiB
    _evict(path)
    with pytest.raises(OSError) as e:
        _core.read_plan(path, size, seg, piece_bytes=256 << 10, pieces=4)
    assert path in str(e.value) and "at byte" in str(e.value), e.value
    seg[0, 1] = 1 << 20  # the next read, within the file, works
    _core.read_plan(path, 1 << 20, seg)
    assert np.array_equal(out[:1 << 20], data[:1 << 20])


def test_ring_comes_from_the_one_pinned_pool(tmp_path):
    size = 2 << 20
    path, data = _file(tmp_path, size, 4)
    out = np.zeros(size, dtype=np.uint8)
    seg = np.array([(0, size, out.ctypes.data, 0)], dtype=np.int64)
    _evict(path)
    _core.read_plan(path, size, seg, piece_bytes=1 << 20, pieces=4)
    first = _core.pinned_pool_stats()
    assert first["made_bytes"] >= 4 << 20 and first["free_bytes"] == first["made_bytes"], first
    _evict(path)
    _core.read_plan(path, size, seg, piece_bytes=1 << 20, pieces=4)
    assert _core.pinned_pool_stats()["made_bytes"] == first["made_bytes"]  # reused, not made again
    assert np.array_equal(out, data)
    assert _core.pinned_pool_release() == first["free_bytes"]
    assert _core.pinned_pool_stats()["made_bytes"] == 0


def test_staging_reports_the_plan_readers_pool(tmp_path):
    """gpuio.safetensors.staging() (the one place a process's page-locked staging is reported) counts the plan
    reader's pool, and release_staging() lets go of its free blocks."""
    import gpuio.safetensors as gst

    size = 1 << 20
    path, data = _file(tmp_path, size, 5)
    out = np.zeros(size, dtype=np.uint8)
    _evict(path)
    _core.read_plan(path, size, np.array([(0, size, out.ctypes.data, 0)], dtype=np.int64), pieces=2)
    st = gst.staging()
    assert st["plan_reader"]["made_bytes"] >= 2 << 20 and st["page_locked_bytes"] >= st["made_bytes"], st
    assert gst.release_staging() >= 2 << 20 and gst.staging()["plan_reader"]["made_bytes"] == 0


@pytest.mark.parametrize("threads", [1, 3])
def test_read_plans_runs_every_job_at_most_threads_at_once(tmp_path, threads):
    """A load's plans in one call: jobs of two files, cold and warm, each its own options; every byte lands, the
    stats are the jobs' summed, at most `threads` jobs ran at once."""
    a, da = _file(tmp_path, (5 << 20) + 77, seed=3)
    os.rename(a, a + ".a")
    b, db = _file(tmp_path, (3 << 20) + 5, seed=4)
    _evict(a + ".a")
    jobs, dests, want = [], [], 0
    for k, (path, data, resident) in enumerate(((a + ".a", da, 0), (b, db, 1))):
        seg, d = _segments(len(data), 10 + k, resident)
        for part in np.array_split(seg, 4):  # four jobs a file, in file order
            jobs.append((path, len(data), np.ascontiguousarray(part), -1, 128 << 10, 3 if k == 0 else 2, 1, True))
        dests.append((data, d))
        want += int(seg[:, 1].sum())
    st = _core.read_plans(jobs, threads)
    for data, d in dests:
        _check(data, d)
    assert st["bytes"] == want and st["calls"] == len(jobs) and 1 <= st["calls_max"] <= threads, st
    assert st["pagecache_bytes"] + st["direct_bytes"] + st["buffered_bytes"] == want, st


def test_read_plans_raises_the_first_failure_after_the_running_jobs(tmp_path):
    path, data = _file(tmp_path, 1 << 20)
    seg, dests = _segments(len(data), 5, 0)
    gone = str(tmp_path / "gone.bin")
    jobs = [(path, len(data), seg, -1, 256 << 10, 2, 1, True), (gone, len(data), seg[:1], -1, 256 << 10, 2, 1, True)]
    with pytest.raises(OSError, match="gone.bin"):
        _core.read_plans(jobs, 2)
    with pytest.raises(ValueError, match="threads=0"):
        _core.read_plans(jobs[:1], 0)
    st = _core.read_plans(jobs[:1], 2)  # the next load works
    _check(data, dests)
    assert st["calls"] == 1 and st["calls_max"] == 1
