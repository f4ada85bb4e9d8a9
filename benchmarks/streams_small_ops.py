"""Per-stream cost of small streams (create, write one small object, close) and where it goes.

    python benchmarks/streams_small_ops.py --streams 3000 --dir /tmp

The memory test's workload: 512 B blocks, durable=False, two engine calls per stream (the sblock write
and the table page write). Engine.read_async/write_async and gpuio.Future.wait are wrapped with timers, so the
table splits the time into engine submit, engine wait and the store's own Python code. Absolute times: dev-box
figures only (BENCHMARKS.md); compare versions side by side in one run.
"""
from __future__ import annotations

import argparse
import os
import time


def run(streams: int, directory: str, rounds: int) -> list[dict]:
    import gpuio.engine as ge
    from gpuio.future import Future
    from gpuio.streams import StreamStore

    acc = {"submit": 0.0, "wait": 0.0}
    read_async, write_async, wait = ge.Engine.read_async, ge.Engine.write_async, Future.wait

    def timed(submit):
        def timed_submit(self, *a):
            t = time.perf_counter()
            try:
                return submit(self, *a)
            finally:
                acc["submit"] += time.perf_counter() - t
        return timed_submit

    def timed_wait(self, timeout=None):
        t = time.perf_counter()
        try:
            return wait(self, timeout)
        finally:
            acc["wait"] += time.perf_counter() - t

    path = os.path.join(directory, "streams-small-ops.bin")
    if os.path.exists(path):
        os.unlink(path)
    ge.Engine.read_async, ge.Engine.write_async = timed(read_async), timed(write_async)
    Future.wait = timed_wait
    out = []
    try:
        st = StreamStore(path, sblock_bytes=8192, buffer_pool_bytes=1 << 20, block_size=512,
                         streams_max=rounds * streams + 1024, mode="c", create_bytes=rounds * streams * 512 + (16 << 20),
                         durable=False, direct=False)
        try:
            for _ in range(rounds):
                acc.update(submit=0.0, wait=0.0)
                calls0 = st.engine.stats()["batches"]
                t = time.perf_counter()
                for i in range(streams):
                    sd = st.create_stream()
                    st.write_stream(sd, i)
                    st.close_stream(sd)
                total = time.perf_counter() - t
                calls = st.engine.stats()["batches"] - calls0
                out.append({"streams": streams, "engine_calls": calls, "us_per_stream": total / streams * 1e6,
                            "submit_us_per_call": acc["submit"] / calls * 1e6,
                            "wait_us_per_call": acc["wait"] / calls * 1e6,
                            "store_us_per_stream": (total - acc["submit"] - acc["wait"]) / streams * 1e6})
        finally:
            st.close()
    finally:
        ge.Engine.read_async, ge.Engine.write_async, Future.wait = read_async, write_async, wait
        if os.path.exists(path):
            os.unlink(path)
    return out


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dir", default=".")
    a = ap.parse_args(argv)
    rows = run(a.streams, a.dir, a.rounds)
    print(f"{'streams':>8} {'calls':>6} {'us/stream':>10} {'submit us/call':>15} {'wait us/call':>13} "
          f"{'store us/stream':>16}")
    for r in rows:
        print(f"{r['streams']:>8} {r['engine_calls']:>6} {r['us_per_stream']:>10.0f} {r['submit_us_per_call']:>15.0f} "
              f"{r['wait_us_per_call']:>13.0f} {r['store_us_per_stream']:>16.0f}")
    return rows


if __name__ == "__main__":
    main()
