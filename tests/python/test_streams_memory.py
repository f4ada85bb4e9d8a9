"""Memory: with 100,000 streams the store's resident memory is the buffer pool plus O(1) bytes per stream.

Streams are created, given one small object and closed; resident memory (RSS) is sampled after the first
10 % and at the end, so the per-stream cost is the slope between the two, free of start-up costs."""
from __future__ import annotations

import os

import numpy as np

from gpuio.streams import StreamStore

STREAMS = int(os.environ.get("GPUIO_MEMORY_STREAMS", "100000"))
PER_STREAM_BYTES_MAX = 64  # 8 B table entry + 1 B free-pool byte per 512 B block, with room for noise


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_resident_memory_is_pool_plus_constant_per_stream(tmp_path):
    pool_bytes = 1 << 20
    rss_before = _rss_bytes()
    # 512 B blocks keep the file small (one block per stream); durable=False: no sync per close (it does
    # not change what is kept in memory, and 100,000 syncs would take minutes on a shared CI disk).
    st = StreamStore(str(tmp_path / "many.bin"), sblock_bytes=8192, buffer_pool_bytes=pool_bytes,
                     block_size=512, streams_max=STREAMS + 1024, create_bytes=STREAMS * 512 + (16 << 20),
                     durable=False, direct=False)
    try:
        warm = STREAMS // 10
        rss_warm = None
        for i in range(STREAMS):
            if i == warm:
                rss_warm = _rss_bytes()
            sd = st.create_stream()
            st.write_stream(sd, i)
            st.close_stream(sd)
        rss_end = _rss_bytes()
        per_stream = (rss_end - rss_warm) / (STREAMS - warm)
        total = rss_end - rss_before
        print(f"{STREAMS} streams: {per_stream:.1f} B resident per stream; store total {total / 2**20:.1f} MiB "
              f"(buffer pool {pool_bytes / 2**20:.1f} MiB)")
        assert per_stream <= PER_STREAM_BYTES_MAX, f"{per_stream:.1f} B per stream"
        assert len(st.streams()) == STREAMS
        sid = st.streams()[STREAMS // 2]
        rd = st.open_stream(sid)
        assert st.read_stream(rd) == STREAMS // 2 and st.read_stream(rd) is None
        st.close_stream(rd)
    finally:
        st.close()
