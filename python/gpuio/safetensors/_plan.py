"""safetensors.pipeline=cpp: a load's plan executed by the GPU layer's plan reader (gpuio/plan_reader.hpp,
_core.read_plan): Python plans which bytes go where (per file, the destinations sorted by file offset, with their
page-cache residency), C++ reads and copies them with the GIL released, on its own io_uring queue and CUDA
streams, its ring of pieces from the process's one pinned pool (_core.pinned_pool_stats)."""
from __future__ import annotations

import threading
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
    """safetensors.pipeline=cpp: each file's destinations cut into plans of chunk_mib of the file, with their
    page-cache residency, executed in file order by `threads` calls of the GPU layer's plan reader at once
    (_core.read_plan, GIL released; each call two O_DIRECT pieces of ring_kib / 2 in flight on its io_uring queue, a
    ring from the process's one pinned pool, copy_streams CUDA streams), as the Python path's readers each do."""
    t0 = time.perf_counter()
    threads = threads or int(_defaults.get("safetensors.threads"))
    chunk_bytes = chunk_bytes or int(_defaults.get("safetensors.chunk_mib")) << 20
    ring_kib = int(_defaults.get("safetensors.ring_kib")) or 2048
    piece_bytes = -(-(ring_kib << 10) // 2 // 4096) * 4096  # whole blocks
    group_bytes = -(-chunk_bytes // piece_bytes) * piece_bytes
    streams = int(_defaults.get("safetensors.copy_streams"))
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.current_stream(device).synchronize()  # the destinations' allocation is ordered before our streams
    work = []
    method = "none"
    for f, sp in sorted(spans.items()):
        for g in groups(sorted((lo, hi, d.data_ptr()) for lo, hi, d in sp), group_bytes):
            work.append((f, g))
    todo = iter(work)
    lock = threading.Lock()
    results: list[dict] = []
    errors: list[BaseException] = []

    def reader() -> None:
        nonlocal method
        while True:
            with lock:
                item = None if errors else next(todo, None)
            if item is None:
                return
            f, g = item
            try:
                resident, m = _core.page_cache_residency(ckpt.fds[f], [(lo, hi - lo) for lo, hi, _ in g])
                seg = np.array([(lo, hi - lo, addr, int(r >= hi - lo)) for (lo, hi, addr), r in zip(g, resident)],
                               dtype=np.int64).reshape(-1, 4)
                if cuda:
                    torch.cuda.set_device(device)
                st = _core.read_plan(ckpt.paths[f], ckpt.headers[f].size, seg, device=device.index if cuda else -1,
                                     piece_bytes=piece_bytes, pieces=2, streams=streams)
            except BaseException as e:  # noqa: BLE001 - raised in the caller's thread below
                with lock:
                    errors.append(e)
                return
            with lock:
                results.append(st)
                method = m

    n = max(1, min(threads, len(work)))
    workers = [threading.Thread(target=reader, name=f"gpuio-plan-{k}", daemon=True) for k in range(n - 1)]
    for w in workers:
        w.start()
    reader()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    total = {k: sum(st[k] for st in results) for k in ("bytes", "pagecache_bytes", "direct_bytes",
                                                        "buffered_bytes", "disk_read_bytes", "pieces", "copies")}
    direct = any(st["direct"] for st in results)
    end = time.perf_counter()
    # the knobs as given (direct_mib and huge_slots do not apply here: the reads in flight are 2 x threads pieces,
    # the ring always in 2 MiB pages), and what ran
    stats = dict(total, pipeline="cpp", chunks=len(work), threads=n, threads_max=threads, chunk_bytes=chunk_bytes,
                 group_bytes=group_bytes, direct_mib=int(_defaults.get("safetensors.direct_mib")),
                 copy_streams=streams, ring_kib=int(_defaults.get("safetensors.ring_kib")), piece_bytes=piece_bytes,
                 huge_slots=bool(_defaults.get("safetensors.huge_slots")),
                 slots="pool" if cuda else "none", residency=method, seconds=end - t0, device=str(device),
                 zero_copy=False, chunk_targets=total["copies"], setup_s=0.0, read_s=end - t0, tail_s=0.0)
    stats["io_paths"] = ["uring+direct"] if direct else []  # for the caller's data_path line
    return stats
