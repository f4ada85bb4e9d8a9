"""Every load's reads: plans executed by the GPU layer's plan reader (gpuio/plan_reader.hpp, _core.read_plans), the
one data path of gpuio.safetensors (safetensors.pipeline names it: cpp). Python plans which bytes go where (per
file, the destinations sorted by file offset, with their page-cache residency); C++ reads and copies them, on its
own threads with the GIL released, each call on its own io_uring queue and CUDA streams, its ring of pieces from
the process's one pinned pool (_core.pinned_pool_stats)."""
from __future__ import annotations

import time

import numpy as np
import torch

from .. import _core, defaults as _defaults


def groups(spans: list[tuple[int, int, int]], group_bytes: int) -> list[list[tuple[int, int, int]]]:
    """A file's destinations [(file lo, file hi, address)] sorted by offset, cut at file offsets that are multiples
    of group_bytes (a destination across a cut goes in parts, each to its own group): the plans of one call each."""
    out: dict[int, list[tuple[int, int, int]]] = {}
    for lo, hi, addr in spans:
        at = lo
        while at < hi:
            end = min(hi, (at // group_bytes + 1) * group_bytes)
            out.setdefault(at // group_bytes, []).append((at, end, addr + at - lo))
            at = end
    return [out[k] for k in sorted(out)]


def load_plan(ckpt, spans: dict[int, list[tuple[int, int, torch.Tensor]]], device: torch.device,
              threads: int | None, chunk_bytes: int | None = None) -> dict:
    """Each file's destinations (spans[f]: (file lo, file hi, uint8 tensor of hi - lo bytes), not overlapping) cut
    into plans of chunk_mib of the file, each with its page-cache residency (probed here, before any read), then
    executed in file order by one call of the GPU layer (_core.read_plans: `threads` plan reader calls at once on
    C++ threads, the GIL released for all of it; a plan of resident bytes copies through a ring of two pieces of
    ring_kib / 2, one that reads from the disk keeps direct_pieces O_DIRECT pieces of direct_kib in flight on its
    io_uring queue; rings from the process's one pinned pool, copy_streams CUDA streams a call). Every destination
    is written when it returns; the first failed read is raised (OSError naming the file and the offset) once every
    call has ended. Returns the load's stats (see _read's doc) and io_paths."""
    t0 = time.perf_counter()
    pipeline = _defaults.get("safetensors.pipeline")  # the one choice: a stale setting of another fails here
    threads = threads or int(_defaults.get("safetensors.threads"))
    chunk_bytes = chunk_bytes or int(_defaults.get("safetensors.chunk_mib")) << 20
    ring_kib = int(_defaults.get("safetensors.ring_kib"))
    piece_bytes = -(-(ring_kib << 10) // 2 // 4096) * 4096  # whole blocks
    group_bytes = -(-chunk_bytes // piece_bytes) * piece_bytes
    direct_kib = int(_defaults.get("safetensors.direct_kib"))
    direct_bytes = -(-(direct_kib << 10) // 4096) * 4096 if direct_kib else piece_bytes
    direct_pieces = int(_defaults.get("safetensors.direct_pieces"))
    streams = int(_defaults.get("safetensors.copy_streams"))
    cuda = device.type == "cuda"
    index = device.index if cuda else -1
    if cuda:
        if index is None:
            index = torch.cuda.current_device()
        torch.cuda.current_stream(device).synchronize()  # the destinations' allocation is ordered before our streams
    jobs = []
    method = "none"
    for f, sp in sorted(spans.items()):
        for g in groups(sorted((lo, hi, d.data_ptr()) for lo, hi, d in sp), group_bytes):
            resident, method = _core.page_cache_residency(ckpt.fds[f], [(lo, hi - lo) for lo, hi, _ in g])
            seg = np.array([(lo, hi - lo, addr, int(r >= hi - lo)) for (lo, hi, addr), r in zip(g, resident)],
                           dtype=np.int64).reshape(-1, 4)
            cold = not bool(seg[:, 3].all())  # a disk read: direct_kib pieces, direct_pieces in flight
            jobs.append((ckpt.paths[f], ckpt.headers[f].size, seg, index, direct_bytes if cold else piece_bytes,
                         direct_pieces if cold else 2, streams, True))
    t_reads = time.perf_counter()  # planned, the destinations' allocation ordered before the copies
    total = _core.read_plans(jobs, threads)  # no jobs (nothing to read): zero stats
    end = time.perf_counter()
    # the knobs the load ran with and what ran: each call's ring from the one pinned pool ("slots"), its O_DIRECT
    # reads in flight at most (inflight_max: of one call; calls_max of them at once); where the time went:
    # planning and residency probes (setup_s), the calls (read_s: reads and copies), nothing after them (tail_s: a
    # call returns once its copies have ended)
    stats = {k: total[k] for k in ("bytes", "pagecache_bytes", "direct_bytes", "buffered_bytes", "disk_read_bytes",
                                   "pieces", "copies", "inflight_max", "calls_max")}
    stats.update(pipeline=pipeline, chunks=len(jobs), threads=max(1, min(threads, len(jobs))), threads_max=threads,
                 chunk_bytes=chunk_bytes, group_bytes=group_bytes, copy_streams=streams, ring_kib=ring_kib,
                 piece_bytes=piece_bytes, direct_kib=direct_kib, direct_piece_bytes=direct_bytes,
                 direct_pieces=direct_pieces, slots="pool", residency=method, seconds=end - t0, device=str(device),
                 chunk_targets=total["copies"], setup_s=t_reads - t0, read_s=end - t_reads, tail_s=0.0)
    stats["io_paths"] = ["uring+direct"] if total["direct"] else []  # for the caller's data_path line
    return stats
