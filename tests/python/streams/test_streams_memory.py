"""Memory: with 100,000 streams the store's resident memory is the buffer pool plus O(1) bytes per stream.

Streams are created, given one small object and closed, in three phases after a warm-up:
1. bulk (most streams, untraced): resident memory (RSS, after gc.collect) may grow by at most what the
   store's fixed-size structures can take per stream -- the table entry (8 B, a lazily zeroed array) and
   the free-pool byte of its one block -- plus PER_STREAM_SLACK, plus a fixed FIXED_SLACK for the
   allocator's own page-granular growth. The slack is an absolute allowance, so it cannot be eaten by
   noise that scales with other tests (the old slope bound of 64 B/stream flaked at 116 B once after
   other tests: about 2 MiB of allocator noise over 18,000 streams);
2. traced (TRACED streams under tracemalloc, which sees every Python and NumPy allocation): the bytes
   still allocated after them, net of garbage collection, must stay below TRACED_BYTES_PER_STREAM per
   stream plus TRACED_FIXED. This is exact, not sampled: a dict entry, a list slot or an array element
   kept per stream (>= 8 B each) fails it whatever the RSS noise;
3. the whole store (engine included) against a formula: buffer pool + table + free pool + engine
   staging + fixed slack.
GPUIO_MEMORY_STREAMS sets the number of streams (default 100,000).
"""
from __future__ import annotations

import gc
import os
import tracemalloc

import pytest

from gpuio.engine import DEFAULTS as ENGINE_DEFAULTS
from gpuio.streams import StreamStore

STREAMS = int(os.environ.get("GPUIO_MEMORY_STREAMS", "100000"))
TRACED = min(5000, max(1000, STREAMS // 10))
WARM = min(2000, STREAMS // 10)
STORE_BYTES_PER_STREAM = 8 + 1        # table entry + free-pool byte of its one 512 B block
PER_STREAM_SLACK = 16                 # RSS allowance per stream beyond the store's own structures
FIXED_SLACK = 8 << 20                 # allocator granularity (arenas, heap top), measured noise ~2 MiB
TRACED_BYTES_PER_STREAM = 4           # anything kept per stream in Python/NumPy costs >= 8 B
TRACED_FIXED = 64 << 10               # one-off growth (dict/list resizes, caches) during the traced phase


def _rss_bytes() -> int:
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _streams(st, first: int, n: int) -> None:
    for i in range(first, first + n):
        sd = st.create_stream()
        st.write_stream(sd, i)
        st.close_stream(sd)


@pytest.mark.slow
def test_resident_memory_is_pool_plus_constant_per_stream(tmp_path):
    pool_bytes = 1 << 20
    streams_max = STREAMS + 1024
    create_bytes = STREAMS * 512 + (16 << 20)
    rss_before = _rss_bytes()
    # 512 B blocks keep the file small (one block per stream); durable=False: no sync per close (it does
    # not change what is kept in memory, and 100,000 syncs would take minutes on a shared CI disk).
    st = StreamStore(str(tmp_path / "many.bin"), sblock_bytes=8192, buffer_pool_bytes=pool_bytes,
                     block_size=512, streams_max=streams_max, mode="c", create_bytes=create_bytes,
                     durable=False, direct=False)
    try:
        _streams(st, 0, WARM)
        bulk = STREAMS - WARM - TRACED
        rss_warm = _rss_bytes()
        _streams(st, WARM, bulk)
        rss_bulk = _rss_bytes()
        grew = rss_bulk - rss_warm
        allowed = bulk * (STORE_BYTES_PER_STREAM + PER_STREAM_SLACK) + FIXED_SLACK
        print(f"bulk: {bulk} streams, RSS +{grew / 2**20:.2f} MiB ({grew / bulk:.1f} B/stream), "
              f"allowed {allowed / 2**20:.2f} MiB")
        assert grew <= allowed, f"RSS grew {grew} B over {bulk} streams ({grew / bulk:.1f} B/stream)"

        gc.collect()
        tracemalloc.start()
        try:
            _streams(st, WARM + bulk, TRACED)
            gc.collect()
            kept, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        print(f"traced: {TRACED} streams keep {kept} B ({kept / TRACED:.2f} B/stream)")
        assert kept <= TRACED * TRACED_BYTES_PER_STREAM + TRACED_FIXED, \
            f"{kept} B still allocated after {TRACED} streams ({kept / TRACED:.1f} B/stream)"

        total = _rss_bytes() - rss_before
        formula = (pool_bytes + 8 * streams_max + create_bytes // 512 + ENGINE_DEFAULTS["staging_bytes"]
                   + STREAMS * PER_STREAM_SLACK + FIXED_SLACK)
        print(f"store total {total / 2**20:.1f} MiB, formula {formula / 2**20:.1f} MiB "
              f"(buffer pool {pool_bytes / 2**20:.1f} MiB)")
        assert total <= formula

        assert len(st.streams()) == STREAMS
        sid = st.streams()[STREAMS // 2]
        rd = st.open_stream(sid)
        assert st.read_stream(rd) == STREAMS // 2 and st.read_stream(rd) is None
        st.close_stream(rd)
    finally:
        st.close()
