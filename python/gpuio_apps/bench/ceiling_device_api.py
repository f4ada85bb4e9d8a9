"""The engine ceiling's GPU-initiated one-block latency rows (docs/decisions/0003): the device API (DeviceQueue
prefetch + prefetch_synchronize in a CUDA kernel) per read path, in interleaved rounds with pread O_DIRECT on the
same file, each with its per-hop breakdown (medians):

  publish  GPU: ring slot check + failures (one PCIe read), request fields and ids over PCIe, fence, doorbell
  wait     GPU: publish end -> the requesting block sees done; of it, on the CPU clock:
    submit   control plane: ring slot seen -> engine.submit returned (batch planned, posted to the worker)
    engine   -> batch done seen (worker pickup, device read, its completion, the engine's staging->GPU copy when
             the path has one)
    signal   -> done word published
    pcie     wait - (submit + engine + signal): the doorbell reaching the control plane's scan and the done word
             reaching the GPU's poll (two PCIe crossings and their polling delays)
  copy     GPU: the requesting block's own copy of a landed read (host-mapped -> dst); ~0 where the engine copied

Paths: batch / kernel (device_read=batch: the engine's staging->GPU copy by cudaMemcpyBatchAsync or a gather
kernel; the throughput path), auto (device_read=auto, the default: a one-block read lands in one of the queue's
host-mapped slots and the block copies it), landed (DeviceQueue::prefetch_landed into a landing area the probe
owns)."""
from __future__ import annotations

import statistics

PATHS = {  # name -> (attach_gpu options, probe's own landing area)
    "batch": (dict(copy="batch", device_read="batch"), False),
    "kernel": (dict(copy="kernel", device_read="batch"), False),
    "auto": (dict(copy="batch", device_read="auto"), False),
    "landed": (dict(copy="batch", device_read="batch"), True),
}
HOPS = ("publish", "wait", "submit", "engine", "signal", "pcie", "copy")


def _med_us(xs) -> float:
    return statistics.median(xs) / 1e3 if xs else 0.0


def device_api_rows(path: str, nblocks: int, reads: int, rounds: int, rng, stream_wait: str, pread_ns, stage_us,
                    delta) -> tuple[dict, dict, dict, list]:
    """Every path's engine and GPU runtime open at once; each round reads `reads` blocks by pread O_DIRECT, then
    by each path in turn (so drift on the shared disk hits all alike). Returns (samples per row name, stage/hop
    medians per row name, mode per row name, the interleaved pread samples)."""
    import torch

    from gpuio.engine import Engine

    dst = torch.empty((64, 4096), dtype=torch.uint8, device="cuda")
    opened = {}
    out, stages, modes, pread = {}, {}, {}, []
    try:
        for name, (opts, _) in PATHS.items():
            e = Engine(path, workers=1, writable=False)
            opened[name] = (e, e.attach_gpu(stream_wait=stream_wait, **opts))
        for name, (e, g) in opened.items():  # warm: the worker's first GPU copy sets up its stream and events
            g.latency_probe(rng.integers(0, nblocks, 20).tolist(), dst, landed=PATHS[name][1])
        hops = {name: {k: [] for k in ("total", "publish", "wait", "copy", "submit", "engine", "signal")}
                for name in opened}
        engine_stats = {name: [] for name in opened}
        for _ in range(rounds):
            pread += pread_ns(path, rng.integers(0, nblocks, reads))
            for name, (e, g) in opened.items():
                s0 = e.core.stats()
                h = g.latency_probe(rng.integers(0, nblocks, reads).tolist(), dst, landed=PATHS[name][1], hops=True)
                d = delta(s0, e.core.stats())
                engine_stats[name].append(stage_us(d, d["ops"]))
                for k, xs in h.items():
                    hops[name][k] += xs
        for name, (e, g) in opened.items():
            h = hops[name]
            row = "gpu-initiated (device API) " + {"batch": "device_read=batch copy=batch",
                                                   "kernel": "device_read=batch copy=kernel",
                                                   "auto": "device_read=auto (default)",
                                                   "landed": "prefetch_landed (own landing area)"}[name]
            st = {k: statistics.median(s[k] for s in engine_stats[name]) for k in engine_stats[name][0]}
            med = {k: _med_us(h[k]) for k in ("publish", "wait", "copy", "submit", "engine", "signal")}
            med["pcie"] = max(0.0, med["wait"] - med["submit"] - med["engine"] - med["signal"])
            st.update({f"hop_{k}": med[k] for k in HOPS})
            gs = g.runtime.stats()
            out[row], stages[row] = h["total"], [st]
            modes[row] = f"{e.core.stats()['latency_mode']}; reads: {gs['device_read_mode']}"
    finally:
        for e, _ in opened.values():
            e.close()
    return out, stages, modes, pread


def hop_lines(table: dict) -> list[str]:
    """One line per GPU-initiated row: its p50 and the median of each hop (us)."""
    lines = []
    for name, t in table.items():
        st = t.get("stage_us", {})
        if not name.startswith("gpu-initiated") or "hop_wait" not in st:
            continue
        lines.append(f"hops {name}: p50 {t['p50_us']:.1f} us = publish {st['hop_publish']:.1f} + wait "
                     f"{st['hop_wait']:.1f} [submit {st['hop_submit']:.1f} + engine {st['hop_engine']:.1f} + signal "
                     f"{st['hop_signal']:.1f} + pcie/poll {st['hop_pcie']:.1f}] + copy {st['hop_copy']:.1f} (medians)")
    return lines
