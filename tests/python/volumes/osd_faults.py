"""OSD faults under a gpuio write/read stream, with a durability check: every write the engine
acknowledged must read back intact once the cluster has recovered. A test helper, not part of the library: used by
test_volumes_faults.py and by volumes_fault_campaign.py (many seeded runs) beside it.

    r = osd_kill_run(cluster, seed=7, who=Identity(conf=cluster.conf))
    assert r["lost"] == 0

One run: a fresh volume; `batches` rounds, each writing `batch_blocks` random blocks with contents unique
to (round, block) and reading back a sample of blocks already acknowledged; at a seeded round one OSD is
killed with SIGKILL (or marked out), at a later seeded round it is restarted (or marked in); then the
cluster is waited on to be active+clean and every block is read and compared with the last acknowledged
version. The run is bounded: each batch fails after io_timeout_s instead of hanging.
"""
from __future__ import annotations

import signal
import time

import numpy as np

from gpuio.volumes import api

# osd_kill_run's options (the campaign's own settings, not knobs of the library)
DEFAULTS = dict(
    blocks=2048,         # volume size in 4 KiB blocks (8 MiB: two RBD objects per OSD on average)
    batches=24,          # write/read rounds
    batch_blocks=32,     # blocks written per round
    verify_blocks=16,    # acknowledged blocks read back per round
    io_timeout_s=90,     # a batch not done by then fails (the OSD is marked down within seconds)
)


def contents(tag: int, blocks, block_size: int = 4096) -> np.ndarray:
    """Bytes of the given blocks as written in round `tag` (differs for every (tag, block))."""
    blocks = np.asarray(blocks, dtype=np.int64)
    words = block_size // 8
    base = (np.full(len(blocks), tag, np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ \
        (blocks.astype(np.uint64) << np.uint64(20))
    x = base[:, None] + np.arange(words, dtype=np.uint64)[None, :] * np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(29)
    return x.view(np.uint8).reshape(-1)


def osd_kill_run(cluster, seed: int, who: api.Identity | None = None, mode: str = "kill", **opts) -> dict:
    """One seeded run (mode "kill": SIGKILL + restart an OSD; "out": `ceph osd out` + `in`). Returns
    {'seed', 'osd', 'acked_writes', 'failed_writes', 'lost', 'stall_s', 'recovery_s', 'seconds'}."""
    if mode not in ("kill", "out"):
        raise ValueError(f"mode must be 'kill' or 'out', got {mode!r}")
    o = dict(DEFAULTS, **opts)
    unknown = set(o) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    t0 = time.monotonic()
    rng = np.random.default_rng(seed)
    n, per = o["blocks"], o["batch_blocks"]
    v = api.create(f"fault-{seed}-{time.time_ns() % 10**9}", n * 4096, who=who)
    osd = int(rng.choice(cluster.osds))
    fault_at = int(rng.integers(2, o["batches"] // 3))
    heal_at = int(rng.integers(fault_at + 2, o["batches"] - 2))
    acked = np.full(n, -1, np.int64)  # last acknowledged round per block (-1: never written)
    failed = 0
    stall = 0.0
    starting = None
    eng = api.open(v, "r+", who=who, io_timeout_ms=int(o["io_timeout_s"] * 1000))
    try:
        for rnd in range(o["batches"]):
            if rnd == fault_at:
                _fault(cluster, osd, mode)
            if rnd == heal_at:
                starting = _heal(cluster, osd, mode)
            blocks = rng.choice(n, per, replace=False)
            t = time.monotonic()
            try:
                eng.write(blocks, contents(rnd, blocks))
                acked[blocks] = rnd
            except OSError:
                failed += 1  # not acknowledged: either contents may be there; not counted as lost
                acked[blocks] = -2  # unknown now; excluded from the check until rewritten
            stall = max(stall, time.monotonic() - t)
            _check(eng, acked, rng.choice(n, o["verify_blocks"], replace=False))
        if starting is not None and starting.wait(120) != 0:
            raise RuntimeError(f"osd.{osd} did not restart (see {cluster.dir}/log/osd.{osd}.log)")
        recovery = cluster.wait_clean()
        lost = _check(eng, acked, np.arange(n), count=True)
    finally:
        eng.close()
    api.delete(v, who=who)
    return {"seed": seed, "mode": mode, "osd": osd, "acked_writes": int((acked >= 0).sum()), "failed_writes": failed,
            "lost": lost, "stall_s": round(stall, 2), "recovery_s": round(recovery, 2),
            "seconds": round(time.monotonic() - t0, 1)}


def _fault(cluster, osd: int, mode: str) -> None:
    if mode == "kill":
        cluster.kill_osd(osd, signal.SIGKILL)
    else:
        cluster.mon({"prefix": "osd out", "ids": [str(osd)]})


def _heal(cluster, osd: int, mode: str):
    if mode == "kill":
        return cluster.start_osd(osd, wait=False)
    else:
        cluster.mon({"prefix": "osd in", "ids": [str(osd)]})


def _check(eng, acked: np.ndarray, blocks: np.ndarray, count: bool = False) -> int:
    """Read blocks; compare those with an acknowledged version. Raises AssertionError on a mismatch
    unless count=True (then returns how many blocks differ)."""
    blocks = np.sort(blocks[acked[blocks] >= 0])
    if len(blocks) == 0:
        return 0
    out = np.empty(len(blocks) * 4096, np.uint8)
    eng.read(blocks, out)
    bad = 0
    got = out.reshape(len(blocks), 4096)
    for i, b in enumerate(blocks):
        if not np.array_equal(got[i], contents(int(acked[b]), [b])):
            bad += 1
    if bad and not count:
        raise AssertionError(f"{bad} acknowledged block(s) read back wrong during the run")
    return bad

__all__ = ["DEFAULTS", "contents", "osd_kill_run"]
