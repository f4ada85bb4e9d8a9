"""Checkpoints in the safetensors layout on any gpuio store: the application side of gpuio.safetensors.

    checkpoint.save_file({"w": w, ...}, "ckpt.safetensors")   # = gpuio.safetensors.save_file, with its stats
    tensors = checkpoint.load_file("ckpt.safetensors", device="cuda")
    safetensors.torch.load_file("ckpt.safetensors")            # reads the same file

Files go through the library (gpuio.safetensors: page-cache aware loads, durable saves). What stays here is
the checkpoint on a `gpuio_apps.papers.store.Store` extent (a Ceph volume, RAID-0 over files), which has no file
system: `save` streams the bytes gpuio.safetensors.layout gives (header padded to 4 KiB, tensors back to
back) into the extent through page-locked host pieces, `load` reads them back into one buffer and returns
the tensors as views of it (gpuio.safetensors.load); `stored_length` reads the checkpoint's length from its
header, and `read_bytes` gives its exact bytes (which `safetensors.torch.load` takes in memory).
"""
from __future__ import annotations

import json
import struct
import time
from typing import Any

import torch

from gpuio import outputs
from gpuio import safetensors as gst
from .pipeline import buffer, host_piece, sync
from .store import Extent, Store

CHUNK_BYTES = 64 << 20  # staging piece per write request while saving
SAVE_SLOTS = 3          # staging pieces while saving: up to SAVE_SLOTS - 1 writes in flight while one fills
READ_BYTES_MAX = 256 << 20  # bytes per read request while loading unstaged (several in flight)
STAGE_BYTES = 128 << 20     # host piece per read while loading staged (load says when)
STAGE_SLOTS = 3             # host pieces: STAGE_SLOTS - 1 reads in flight while one piece is copied out


def layout(tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None
           ) -> tuple[bytes, list[tuple[str, torch.Tensor]], int]:
    """(the header gpuio.safetensors writes, [(name, tensor)] in the order their bytes follow it, data bytes)."""
    header, entries = gst.layout(tensors, metadata)
    return header, entries, sum(t.numel() * t.element_size() for _, t in entries)


def save(store: Store, ext: Extent, header: bytes, entries: list, device: torch.device,
         chunk_bytes: int = CHUNK_BYTES, slots: int = SAVE_SLOTS, stats: dict | None = None) -> int:
    """Stream header + tensors into `ext` through `slots` staging pieces in aligned host memory: a piece is
    filled (device-to-host copies, queued without waiting), then written by O_DIRECT in place while the next
    pieces are filled, so up to slots - 1 writes are in flight while one piece fills. Page-locked pieces when
    the tensors are on `device` CUDA, so those copies run at full rate and asynchronously; a piece's write
    starts once its copies are done (a CUDA event, not a device-wide sync). Host pieces rather than GPU ones: a
    write of CUDA memory moves one bounce chunk at a time on its stream, which held the H200 save of GPT-2
    medium at 0.55 of the raw write rate; a host piece is many engine requests in flight.
    stats (optional dict): filled with alloc_s (the pieces, page-locked on CUDA), fill_s (host time queueing
    copies into pieces; CPU tensors: the copies themselves), copy_wait_s (waiting for device-to-host copies), write_wait_s (waiting for a piece's write to
    finish before refilling it: the device's share), sync_s (the final store.sync), pieces, max_in_flight.
    Returns the bytes written (whole blocks)."""
    bs = store.block_size
    total = len(header) + sum(t.numel() * t.element_size() for _, t in entries)
    chunk_bytes = max(bs, min(chunk_bytes, -(-total // bs) * bs) // bs * bs)  # small checkpoints: small pieces
    cuda = device.type == "cuda"
    nslots = max(2, min(slots, -(-total // chunk_bytes)))
    t0 = time.perf_counter()
    piece = [host_piece(chunk_bytes, pinned=cuda) for _ in range(nslots)]
    inflight: list = [None] * nslots
    st = {"alloc_s": time.perf_counter() - t0, "fill_s": 0.0, "copy_wait_s": 0.0, "write_wait_s": 0.0, "sync_s": 0.0,
          "pieces": 0, "max_in_flight": 0}
    cur, fill, written = 0, 0, 0

    def emit(nbytes: int, last: bool):
        nonlocal cur, fill, written
        nb = -(-nbytes // bs) * bs
        if last and nb > nbytes:
            piece[cur][nbytes:nb].zero_()
        if cuda:
            t0 = time.perf_counter()
            ev = torch.cuda.Event()
            ev.record(torch.cuda.current_stream(device))
            ev.synchronize()  # this piece's device-to-host copies landed
            st["copy_wait_s"] += time.perf_counter() - t0
        inflight[cur] = store.write_async(ext, written, piece[cur][:nb])
        st["pieces"] += 1
        st["max_in_flight"] = max(st["max_in_flight"], sum(h is not None for h in inflight))
        written += nb
        cur, fill = (cur + 1) % nslots, 0
        if inflight[cur] is not None:  # the oldest piece's write must be done before it is refilled
            t0 = time.perf_counter()
            inflight[cur].wait()
            st["write_wait_s"] += time.perf_counter() - t0
            inflight[cur] = None

    pieces = [torch.frombuffer(bytearray(header), dtype=torch.uint8)] + [gst.tensor_bytes(t) for _, t in entries]
    t_fill = time.perf_counter()
    for p in pieces:
        at = 0
        while at < p.numel():
            take = min(p.numel() - at, chunk_bytes - fill)
            piece[cur][fill:fill + take].copy_(p[at:at + take], non_blocking=cuda)
            fill += take
            at += take
            if fill == chunk_bytes:
                st["fill_s"] += time.perf_counter() - t_fill
                emit(fill, False)
                t_fill = time.perf_counter()
    st["fill_s"] += time.perf_counter() - t_fill
    if fill:
        emit(fill, True)
    t0 = time.perf_counter()
    for k in range(nslots):
        h = inflight[(cur + k) % nslots]
        if h is not None:
            h.wait()
    st["write_wait_s"] += time.perf_counter() - t0
    sync(device)
    t0 = time.perf_counter()
    store.sync()
    st["sync_s"] = time.perf_counter() - t0
    if stats is not None:
        stats.update(st)
    return written


def save_file(tensors: dict[str, torch.Tensor], path: str, metadata: dict[str, str] | None = None) -> dict:
    """gpuio.safetensors.save_file (durable: written under a temporary name, fsynced, renamed over `path`),
    returning its stats: bytes, data_offset, preallocated, alloc_s, copy_wait_s, write_wait_s, sync_s, seconds."""
    stats: dict[str, Any] = {}
    gst.save_file(tensors, path, metadata, stats=stats)
    header, _ = gst.layout(tensors, metadata)
    return {"data_offset": len(header), **stats}


def load_file(path: str, device: Any = "cpu") -> dict[str, torch.Tensor]:
    """gpuio.safetensors.load_file: the tensors of any safetensors file on `device`."""
    return gst.load_file(path, device=device)


fsync_path = outputs.fsync_path  # fsync the file at `path` (data and metadata, its length included)


def read_bytes(store: Store, ext: Extent, nbytes: int) -> bytes:
    """The first nbytes of `ext`, read through the store into host memory."""
    bs = store.block_size
    if nbytes < 0 or -(-nbytes // bs) > ext.nblocks:
        raise IndexError(f"nbytes={nbytes} lies outside extent {ext.name!r} ({ext.nblocks * bs} bytes)")
    buf = buffer(-(-nbytes // bs) * bs, torch.device("cpu"))
    if buf.numel():
        store.read(ext, 0, buf)
    return bytes(buf[:nbytes].numpy())


def stored_length(store: Store, ext: Extent) -> int:
    """The byte length of the checkpoint at the start of `ext` (8 + header + data), from its header."""
    bs = store.block_size
    (n,) = struct.unpack("<Q", read_bytes(store, ext, bs)[:8])
    if 8 + n > ext.nblocks * bs:
        raise ValueError(f"extent {ext.name!r} does not start with a checkpoint: header length {n} exceeds "
                         f"its {ext.nblocks * bs} bytes")
    head = json.loads(read_bytes(store, ext, 8 + n)[8:])
    ends = [e["data_offsets"][1] for k, e in head.items() if k != "__metadata__"]
    return 8 + n + max(ends, default=0)


def _read_staged(store: Store, ext: Extent, buf: torch.Tensor, whole: int, stage_bytes: int) -> None:
    """Read the first `whole` bytes of `ext` into `buf` through STAGE_SLOTS aligned host pieces (page-locked
    when buf is on CUDA): each piece is read by O_DIRECT in place, then copied to buf while the next
    STAGE_SLOTS - 1 pieces are being read. A piece is refilled only after its copy out has finished."""
    bs = store.block_size
    piece = max(bs, min(stage_bytes, whole) // bs * bs)
    offs = list(range(0, whole, piece))
    cuda = buf.is_cuda
    slots = [host_piece(piece, pinned=cuda) for _ in range(min(STAGE_SLOTS, len(offs)))]
    copied: list = [None] * len(slots)  # per slot: the CUDA event of its last copy out
    reads = {}

    def start(k: int) -> None:
        s = k % len(slots)
        if copied[s] is not None:
            copied[s].synchronize()
            copied[s] = None
        reads[k] = store.read_async(ext, offs[k], slots[s][:min(piece, whole - offs[k])])

    for k in range(min(len(slots) - 1, len(offs))):
        start(k)
    for k, off in enumerate(offs):
        if k + len(slots) - 1 < len(offs):
            start(k + len(slots) - 1)  # into the slot piece k - 1 was copied out of
        reads.pop(k).wait()
        s, n = k % len(slots), min(piece, whole - off)
        buf[off:off + n].copy_(slots[s][:n], non_blocking=cuda)
        if cuda:
            copied[s] = torch.cuda.Event()
            copied[s].record()


def load(store: Store, ext: Extent, nbytes: int, device: torch.device, tail_path: str | None = None,
         staged: bool | None = None, stage_bytes: int = STAGE_BYTES) -> dict:
    """Read a checkpoint of `nbytes` from `ext` into one buffer on `device`, return its tensors as views.
    tail_path: the file whose last partial block (past the engine's whole blocks) is read with pread.
    staged (default: on CUDA): read through host pieces (_read_staged) instead of READ_BYTES_MAX reads of
    CUDA memory, which move through the GPU layer's 16 bounce slots of 4 MiB: the H200 load of GPT-2
    medium ran at 0.78 of the raw read rate that way (judged: >= 0.9), and the first CUDA read also paid
    for attaching the GPU layer inside the load's clock."""
    bs = store.block_size
    whole = nbytes // bs * bs if tail_path else -(-nbytes // bs) * bs
    buf = buffer(-(-nbytes // bs) * bs, device)
    if staged is None:
        staged = device.type == "cuda"
    handles = []
    if staged and whole:
        _read_staged(store, ext, buf, whole, stage_bytes)
    else:
        handles = [store.read_async(ext, off, buf[off:min(off + READ_BYTES_MAX, whole)])
                   for off in range(0, whole, READ_BYTES_MAX)]
    if tail_path and whole < nbytes:
        with open(tail_path, "rb") as f:
            f.seek(whole)
            tail = f.read(nbytes - whole)
        buf[whole:nbytes].copy_(torch.frombuffer(bytearray(tail), dtype=torch.uint8))
    for h in handles:
        h.wait()
    sync(device)
    return gst.load(buf[:nbytes])
