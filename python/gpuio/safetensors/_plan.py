"""safetensors.pipeline=cpp: a load's plan executed by the GPU layer's plan reader (gpuio/plan_reader.hpp,
_core.read_plan): Python plans which bytes go where (per file, the destinations sorted by file offset, with their
page-cache residency), C++ reads and copies them with the GIL released, on its own io_uring queue and CUDA
streams, its ring of pieces from the process's one pinned pool (_core.pinned_pool_stats)."""
from __future__ import annotations

import time

import numpy as np
import torch

from .. import _core, defaults as _defaults


def load_plan(ckpt, spans: dict[int, list[tuple[int, int, torch.Tensor]]], device: torch.device,
               threads: int | None) -> dict:
    """safetensors.pipeline=cpp: each file's plan (its destinations, with their page-cache residency) executed by
    the GPU layer's plan reader (_core.read_plan, GIL released): 2 x threads O_DIRECT pieces of ring_kib / 2 in
    flight, the ring from the process's one pinned pool (_core.pinned_pool_stats)."""
    t0 = time.perf_counter()
    threads = threads or int(_defaults.get("safetensors.threads"))
    ring_kib = int(_defaults.get("safetensors.ring_kib")) or 2048
    piece_bytes, pieces = -(-(ring_kib << 10) // 2 // 4096) * 4096, 2 * threads  # whole blocks
    streams = int(_defaults.get("safetensors.copy_streams"))
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.current_stream(device).synchronize()  # the destinations' allocation is ordered before our streams
    total = {"bytes": 0, "pagecache_bytes": 0, "direct_bytes": 0, "buffered_bytes": 0, "disk_read_bytes": 0,
             "pieces": 0, "copies": 0, "inflight_max": 0}
    direct, method = False, "none"
    for f, sp in sorted(spans.items()):
        sp = sorted(sp, key=lambda x: x[0])
        resident, method = _core.page_cache_residency(ckpt.fds[f], [(lo, hi - lo) for lo, hi, _ in sp])
        seg = np.array([(lo, hi - lo, d.data_ptr(), int(r >= hi - lo)) for (lo, hi, d), r in zip(sp, resident)],
                       dtype=np.int64).reshape(-1, 4)
        st = _core.read_plan(ckpt.paths[f], ckpt.headers[f].size, seg, device=device.index if cuda else -1,
                             piece_bytes=piece_bytes, pieces=pieces, streams=streams)
        direct |= st["direct"]
        for k in total:
            total[k] = max(total[k], st[k]) if k == "inflight_max" else total[k] + st[k]
    end = time.perf_counter()
    stats = dict(total, pipeline="cpp", chunks=0, threads=threads, threads_max=threads, chunk_bytes=piece_bytes,
                 direct_mib=0, ring_kib=ring_kib, piece_bytes=piece_bytes, huge_slots=True,
                 slots="pool" if cuda else "none", residency=method, seconds=end - t0, device=str(device),
                 zero_copy=False, chunk_targets=total["copies"], setup_s=0.0, read_s=end - t0, tail_s=0.0)
    stats["io_paths"] = ["uring+direct"] if direct else []  # for the caller's data_path line
    return stats
