"""Reading tensors' bytes into CUDA or host memory: this module decides where each tensor's bytes land; the GPU
layer's plan reader (_plan.load_plan, gpuio/plan_reader.hpp) moves them. It is the one data path of every load
(load_file, safe_open, zero_copy=True, the distributed loader's runs).

Destinations. Every tensor gets its own allocation (torch.empty on CUDA: the caching allocator starts each at
512 bytes or more; on the CPU a NumPy array over-allocated by DEST_ALIGN bytes and used from a DEST_ALIGN
boundary, which torch.from_numpy wraps as the tensor's storage of exactly its bytes): it starts on a 256-byte
boundary whatever its file offset, and deleting it frees its bytes. Files written by `safetensors` carry no
padding (a real checkpoint had 255 of 255 parameters off a 256-byte boundary, and cuBLAS picked other kernels
for them), so the file's bytes cannot land in place: the plan reader stages them and copies each to its
destination at its own shift. zero_copy=True keeps one destination buffer per file instead (buffer_layouts: each
run of adjacent tensors at an address congruent to its file offset modulo 4 KiB); the runs are the plan's
destinations, the tensors views of the buffer (views), aligned only as in the file, and the buffer lives while any
of them does.

The reads (load_plan). Each file's destinations, sorted by file offset, are cut into plans of gpuio.defaults'
safetensors.chunk_mib of the file, each destination's page-cache residency looked up (`_core.page_cache_residency`:
cachestat(2), or mincore(2) on older kernels); safetensors.threads plan reader calls run at once with the GIL
released. A call copies resident bytes out of the page cache with RWF_NOWAIT (on the CPU straight into the
destination; a page evicted since the probe is read by O_DIRECT instead, never waited for), reads the rest by
O_DIRECT in whole blocks, safetensors.direct_pieces pieces of safetensors.direct_kib in flight on its io_uring
queue (resident bytes bound for CUDA go through two pieces of safetensors.ring_kib / 2), each piece copied to
every destination it overlaps as it lands (memcpy, or cudaMemcpyAsync on safetensors.copy_streams streams), and the
file's partial last block by pread. Its ring comes from the process's one pinned pool (gst.staging()'s
plan_reader). A read that fails raises OSError naming the file and the offset, once nothing writes a destination.

Stats: bytes, pagecache_bytes, direct_bytes, buffered_bytes, disk_read_bytes, inflight_max, data_path (one line,
e.g. 'pagecache 6.1 GiB + uring+direct 2.1 GiB -> pinned -> cuda:0'), pipeline ("cpp"), zero_copy, and the knobs
the load ran with.
"""
from __future__ import annotations

from typing import Any

import torch

from ._format import TensorInfo
from ._plan import load_plan

ALIGN = 4096
DEST_ALIGN = 256  # every returned tensor starts on such a boundary (CUDA's caching allocator gives 512)


def _up(x: int) -> int:
    return -(-x // ALIGN) * ALIGN


def buffer_layouts(by_file: dict[int, list[TensorInfo]]
                   ) -> dict[int, tuple[int, dict[str, int], list[tuple[int, int, int]]]]:
    """zero_copy: per file, its buffer's bytes, {tensor name: position in it} and its runs [(file begin, file end,
    position)]: the chosen tensors merged into runs of adjacent bytes (a gap within one block is read through),
    each run placed at a position congruent to its file offset modulo ALIGN."""
    layouts: dict[int, tuple[int, dict[str, int], list[tuple[int, int, int]]]] = {}
    for f, infos in sorted(by_file.items()):
        runs: list[list[Any]] = []  # [begin, end, [infos]]
        for t in sorted(infos, key=lambda t: (t.begin, t.end)):
            if runs and t.begin <= _up(runs[-1][1]):  # adjacent, or a gap within one block: read through it
                runs[-1][1] = max(runs[-1][1], t.end)
                runs[-1][2].append(t)
            else:
                runs.append([t.begin, t.end, [t]])
        cursor, where, placed = 0, {}, []
        for begin, end, ts in runs:
            pos = _up(cursor) + begin % ALIGN
            placed.append((begin, end, pos))
            for t in ts:
                where[t.name] = pos + t.begin - begin
            cursor = pos + end - begin
        layouts[f] = (_up(cursor), where, placed)
    return layouts


def owned_empty(nbytes: int, device: torch.device) -> torch.Tensor:
    """A uint8 tensor of nbytes that owns its storage (of exactly nbytes, freed with the tensor) and starts on a
    DEST_ALIGN boundary: torch.empty on CUDA; on the CPU a NumPy array used from an aligned byte (torch's CPU
    allocator aligns to 64 only)."""
    if device.type == "cuda":
        t = torch.empty(nbytes, dtype=torch.uint8, device=device)
        if t.data_ptr() % DEST_ALIGN == 0:
            return t
        raise RuntimeError(f"torch gave {device} memory at {t.data_ptr():#x}, not {DEST_ALIGN}-byte aligned "
                           "(a custom CUDA allocator?)")
    from ..engine import aligned_empty

    return torch.from_numpy(aligned_empty(nbytes, DEST_ALIGN))


def owned(t: torch.Tensor) -> torch.Tensor:
    """t itself where it is contiguous, starts on a DEST_ALIGN boundary and is all of its storage; else a copy
    into memory of its own that is (what get_slice returns: a slice of a tensor is a view)."""
    if (t.is_contiguous() and t.data_ptr() % DEST_ALIGN == 0 and t.storage_offset() == 0
            and t.untyped_storage().nbytes() == t.numel() * t.element_size()):
        return t
    out = owned_empty(t.numel() * t.element_size(), t.device)
    if t.numel():
        out.copy_(t.contiguous().reshape(-1).view(torch.uint8))
    return out.view(t.dtype).reshape(t.shape)


def _zero_copy_buffer(nbytes: int, device: torch.device) -> torch.Tensor:
    """One file's zero_copy buffer: torch.empty on CUDA, 4 KiB-aligned host memory on the CPU (so a run's
    address is congruent to its file offset modulo ALIGN, as buffer_layouts places it)."""
    if device.type == "cuda":
        return torch.empty(nbytes, dtype=torch.uint8, device=device)
    return host_buffer(nbytes)


def host_buffer(nbytes: int) -> torch.Tensor:
    """nbytes of 4 KiB-aligned host memory (gpuio.engine.aligned_empty) as a uint8 tensor (also _save's slots
    where a save stages through plain host memory)."""
    from ..engine import aligned_empty

    return torch.from_numpy(aligned_empty(max(nbytes, 1)))[:nbytes]


def read_spans(ckpt, spans: dict[int, list[tuple[int, int, torch.Tensor]]], device: torch.device,
                threads: int | None, chunk_bytes: int | None, zero_copy: bool) -> dict:
    stats = load_plan(ckpt, spans, device, threads, chunk_bytes)
    stats["zero_copy"] = zero_copy
    stats["data_path"] = data_path_line(stats, stats.pop("io_paths"), device)
    return stats


def read_tensors(ckpt, by_file: dict[int, list[TensorInfo]], device: torch.device, threads: int | None = None,
                 chunk_bytes: int | None = None, zero_copy: bool = False) -> tuple[dict[str, torch.Tensor], dict]:
    """Read the tensors of by_file onto device: ({name: tensor}, stats). Each tensor owns its memory and starts
    on a DEST_ALIGN boundary; zero_copy=True: views of one buffer per file instead (see the module's doc).
    threads and chunk_bytes: None: gpuio.defaults' safetensors.threads and safetensors.chunk_mib."""
    if zero_copy:
        bufs, stats = read_into_buffers(ckpt, by_file, device, threads, chunk_bytes)
        return views(bufs, by_file, device), stats
    out, spans = destinations(by_file, device)
    return out, read_spans(ckpt, spans, device, threads, chunk_bytes, zero_copy=False)


def destinations(by_file: dict[int, list[TensorInfo]], device: torch.device
                 ) -> tuple[dict[str, torch.Tensor], dict[int, list[tuple[int, int, torch.Tensor]]]]:
    """The tensors of by_file allocated on device, not yet read ({name: tensor of its dtype and shape}, each
    owning its memory from a DEST_ALIGN boundary) and the plan's destinations of them ({file: [(file begin,
    file end, its uint8 memory)]}) for read_spans."""
    out: dict[str, torch.Tensor] = {}
    spans: dict[int, list[tuple[int, int, torch.Tensor]]] = {}
    for f, infos in by_file.items():
        for t in infos:
            d = owned_empty(t.nbytes, device)
            out[t.name] = d.view(t.torch_dtype).reshape(t.torch_shape)
            if t.nbytes:
                spans.setdefault(f, []).append((t.begin, t.end, d))
    return out, spans


def read_into_buffers(ckpt, by_file: dict[int, list[TensorInfo]], device: torch.device, threads: int | None = None,
                      chunk_bytes: int | None = None) -> tuple[dict[int, tuple[torch.Tensor, dict[str, int]]], dict]:
    """zero_copy: read the tensors of by_file onto device, one buffer per file laid out by buffer_layouts, its runs
    the plan's destinations: ({file: (its buffer, {name: position})}, stats)."""
    bufs: dict[int, tuple[torch.Tensor, dict[str, int]]] = {}
    spans: dict[int, list[tuple[int, int, torch.Tensor]]] = {}
    for f, (nbytes, where, placed) in buffer_layouts(by_file).items():
        buf = _zero_copy_buffer(nbytes, device)
        bufs[f] = (buf, where)
        spans[f] = [(b, e, buf[pos:pos + e - b]) for b, e, pos in placed if e > b]
    return bufs, read_spans(ckpt, spans, device, threads, chunk_bytes, zero_copy=True)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def data_path_line(stats: dict, io_paths: list[str], device: torch.device) -> str:
    """e.g. 'pagecache 6.1 GiB + uring+direct 2.1 GiB -> pinned -> cuda:0'."""
    parts = []
    if stats["pagecache_bytes"]:
        parts.append(f"pagecache {_size(stats['pagecache_bytes'])}")
    if stats["direct_bytes"]:
        parts.append(f"{'/'.join(io_paths) or 'direct'} {_size(stats['direct_bytes'])}")
    if stats["buffered_bytes"]:
        parts.append(f"pread {_size(stats['buffered_bytes'])}")
    src = " + ".join(parts) or "nothing read"
    return f"{src} -> pinned -> {device}" if device.type == "cuda" else f"{src} -> {device}"


def views(bufs: dict[int, tuple[torch.Tensor, dict[str, int]]], by_file: dict[int, list[TensorInfo]],
          device: torch.device) -> dict[str, torch.Tensor]:
    """Each tensor as a view of its file's buffer (a copy where its address does not suit its dtype: only in
    files whose header length is not a multiple of 8, or a buffer given at an odd address)."""
    out = {}
    for f, infos in by_file.items():
        buf, where = bufs[f]
        for t in infos:
            dtype, shape = t.torch_dtype, t.torch_shape
            if t.nbytes == 0:
                out[t.name] = torch.empty(shape, dtype=dtype, device=device)
                continue
            raw = buf[where[t.name]:where[t.name] + t.nbytes]
            if raw.data_ptr() % dtype.itemsize:
                raw = raw.clone()
            out[t.name] = raw.view(dtype).reshape(shape)
    return out
