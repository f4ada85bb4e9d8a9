"""Saving tensors (CUDA or host) as one safetensors file, durably, at the disk's write rate.

The header is padded with spaces so the data starts at 4 KiB (the format allows trailing whitespace in the
header; `safetensors`, fastsafetensors and Run:ai's streamer read such files), tensors are packed largest
element first so every offset suits its dtype. The bytes stream through PIECE_SLOTS page-locked pieces (plain
aligned host memory when no tensor is on CUDA): a piece is filled by device->host copies queued without
waiting, then written by O_DIRECT in place through the engine while the next pieces fill, so up to
PIECE_SLOTS - 1 writes are in flight while one fills.

Durability and atomicity (gpuio.outputs.atomic_output, as every file gpuio writes): the file is written under a
temporary name in the destination's directory (its blocks reserved first: into holes of an ext4 file O_DIRECT writes allocate one at a time), cut to its exact
length, fsynced, renamed over the destination and the directory fsynced, so when save_file returns the file
is on the device, and a crash at any point leaves either the old file or the new one, never a mix. A
destination that exists and is not a regular file (a directory, a device, a FIFO) is refused; a symbolic link
is followed (its target is replaced, the link stays), and a replaced file keeps its permissions.
"""
from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import torch

from .. import _core, _pinned, defaults as _defaults, outputs
from ._format import SafetensorError, dtype_name, header_bytes
from ._read import host_buffer
from ._source import _open_io

ALIGN = 4096
PIECE_BYTES = 64 << 20  # one staging piece: one engine write of 64 x 1 MiB requests
PIECE_SLOTS = 3         # pieces: PIECE_SLOTS - 1 writes in flight while one fills


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if t.dim() == 0:
        t = t.reshape(1)
    return t.contiguous().view(-1).view(torch.uint8)


def _file_shape(name: str, t: torch.Tensor) -> list[int]:
    """The shape the format records: F4 counts values, torch's float4_e2m1fn_x2 elements hold two."""
    shape = list(t.shape)
    if name == "F4" and shape:
        shape[-1] *= 2
    return shape


def plan_entries(tensors: dict[str, torch.Tensor]) -> list[tuple[str, str, list[int], int, torch.Tensor]]:
    """[(name, dtype name, file shape, nbytes, tensor)] in the order written: largest element first, then by
    name, so each tensor's offset is a multiple of its element size. One line naming any entry that is not a
    savable tensor."""
    if not isinstance(tensors, dict):
        raise TypeError(f"tensors must be a dict of name -> torch.Tensor, got {type(tensors).__name__}")
    entries = []
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"tensor names must be str, got {name!r}")
        if name == "__metadata__":
            raise SafetensorError("'__metadata__' is reserved by the format; pass metadata= instead")
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"tensors[{name!r}] is a {type(t).__name__}, not a torch.Tensor")
        if t.layout != torch.strided:
            raise SafetensorError(f"tensors[{name!r}] is a {t.layout} tensor; save t.to_dense()")
        dn = dtype_name(t.dtype)
        entries.append((name, dn, _file_shape(dn, t), t.numel() * t.element_size(), t))
    entries.sort(key=lambda e: (-e[4].element_size(), e[0]))
    return entries


def _storage_key(t: torch.Tensor) -> tuple | None:
    """(device, storage address, storage bytes) of a tensor that has real storage; None for meta and empty ones."""
    if t.device.type == "meta":
        return None
    st = t.untyped_storage()
    return (t.device, st.data_ptr(), st.nbytes()) if st.data_ptr() and st.nbytes() else None


def shared_groups(tensors: dict[str, torch.Tensor]) -> list[set[str]]:
    """The names of `tensors` grouped as safetensors.torch groups them: by storage (device, address, size), each
    storage's tensors then split where their byte ranges do not overlap (disjoint views of one buffer are not
    shared). Every name on real storage is in exactly one group; a group of two or more shares memory."""
    by_storage: dict[tuple, set[str]] = {}
    for name, t in tensors.items() if isinstance(tensors, dict) else ():
        if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
            continue  # not savable: plan_entries says so in one line
        key = _storage_key(t)
        if key is not None:
            by_storage.setdefault(key, set()).add(name)
    out: list[set[str]] = []
    for names in sorted(by_storage.values(), key=sorted):
        if len(names) < 2:
            out.append(names)
            continue
        areas = sorted((tensors[n].data_ptr(), _end_ptr(tensors[n]), n) for n in names)
        _, last_stop, first = areas[0]
        out.append({first})
        for start, stop, n in areas[1:]:
            if start >= last_stop:
                out.append({n})
            else:
                out[-1].add(n)
            last_stop = stop
    return out


def _end_ptr(t: torch.Tensor) -> int:
    return t.view(-1)[-1].data_ptr() + t.element_size() if t.numel() else t.data_ptr()


def refuse_shared(tensors: dict[str, torch.Tensor]) -> None:
    """RuntimeError (as safetensors.torch.save_file raises) where tensors share memory: a file would hold their
    bytes twice and a load would not tie them again. save_model keeps one name of each group instead."""
    failing = [sorted(g) for g in shared_groups(tensors) if len(g) > 1]
    if failing:
        raise RuntimeError(f"Some tensors share memory, this will lead to duplicate memory on disk and potential "
                           f"differences when loading them again: {failing}; save one name of each (save_model "
                           f"does: gpuio.safetensors.save_model(model, filename))")


def layout(tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None
           ) -> tuple[bytes, list[tuple[str, torch.Tensor]]]:
    """The file save_file writes, for writers of their own (a volume, a RAID-0 store): its header (the 8-byte
    length and the JSON, padded so the data starts at 4 KiB) and the tensors in the order their bytes follow
    it, back to back (each tensor's bytes: t.contiguous().view(-1).view(torch.uint8); 0-d tensors too)."""
    entries = plan_entries(tensors)
    header, _ = header_bytes([(n, d, s, nb) for n, d, s, nb, _ in entries], metadata)
    return header, [(e[0], e[4]) for e in entries]


def tensor_bytes(t: torch.Tensor) -> torch.Tensor:
    """t's bytes as layout() places them: a flat uint8 view (a contiguous copy where t is not contiguous)."""
    return _as_bytes(t)


def staging_slot(nbytes: int, pooled: bool) -> tuple[torch.Tensor, str]:
    """A page-locked slot of nbytes and its kind: "pool" (gpuio._pinned's 2 MiB pages; hand it back with
    _pinned.give_slot once no copy or write uses it) where pooled and the pool gives one, else "torch" (a pinned
    block of torch's caching allocator)."""
    slot = _pinned.take_slot(nbytes) if pooled else None
    return (slot, "pool") if slot is not None else (_pinned.torch_pinned(nbytes, ALIGN), "torch")


def _pieces(n: int, nbytes: int, pinned: bool) -> tuple[list[torch.Tensor], list[torch.Tensor], str]:
    """(n slots of nbytes, those of them taken from gpuio's pool, their kinds: "pool", "torch", both joined by +,
    or "host"): page-locked where pinned (from the pool where safetensors.huge_slots), else plain 4 KiB-aligned
    host memory."""
    if not pinned:
        return [host_buffer(nbytes) for _ in range(n)], [], "host"
    slots = [staging_slot(nbytes, bool(_defaults.get("safetensors.huge_slots"))) for _ in range(n)]
    return ([s for s, _ in slots], [s for s, kind in slots if kind == "pool"],
            "+".join(sorted({kind for _, kind in slots})))


def _write_stream(fd: int, io: Any, header: bytes, entries: list, cudas: set, total: int, st: dict) -> None:
    """Stream header + tensors into the file (fd; io: its O_DIRECT target, or None to pwrite through the page
    cache) in whole blocks, the last one zero-padded."""
    piece = max(ALIGN, min(PIECE_BYTES, -(-total // ALIGN) * ALIGN))
    nslots = max(1, min(PIECE_SLOTS, -(-total // piece)))
    t0 = time.perf_counter()
    slots, pooled, st["slots"] = _pieces(nslots, piece, pinned=bool(cudas))
    st["huge_slots"] = bool(_defaults.get("safetensors.huge_slots"))  # asked for; "slots" says what came
    st["alloc_s"] = time.perf_counter() - t0
    inflight: list[Any] = [None] * nslots
    cur, fill, written = 0, 0, 0

    def emit(nbytes: int) -> None:
        nonlocal cur, fill, written
        nb = -(-nbytes // ALIGN) * ALIGN
        buf = slots[cur]
        if nb > nbytes:
            buf[nbytes:nb].zero_()
        if cudas:
            t = time.perf_counter()
            for d in cudas:  # this piece's device->host copies (queued on each device's current stream) landed
                torch.cuda.current_stream(d).synchronize()
            st["copy_wait_s"] += time.perf_counter() - t
        if io is not None:
            ids = np.arange(written // ALIGN, (written + nb) // ALIGN, dtype=np.int64)
            inflight[cur] = io.write_async(ids, buf[:nb])
        else:
            os.pwrite(fd, memoryview(buf[:nb].numpy()), written)
        written += nb
        st["pieces"] += 1
        cur, fill = (cur + 1) % nslots, 0
        if inflight[cur] is not None:  # the oldest piece's write must be done before the piece is refilled
            t = time.perf_counter()
            inflight[cur].wait()
            st["write_wait_s"] += time.perf_counter() - t
            inflight[cur] = None

    sources = [torch.frombuffer(bytearray(header), dtype=torch.uint8)] + [_as_bytes(t) for _, t in entries]
    for src in sources:
        at = 0
        while at < src.numel():
            take = min(src.numel() - at, piece - fill)
            slots[cur][fill:fill + take].copy_(src[at:at + take], non_blocking=src.is_cuda)
            fill += take
            at += take
            if fill == piece:
                emit(fill)
    if fill:
        emit(fill)
    t = time.perf_counter()
    for h in inflight:
        if h is not None:
            h.wait()
    st["write_wait_s"] += time.perf_counter() - t
    for slot in pooled:  # no write uses them any more (on an error they are dropped: a write may still read them)
        _pinned.give_slot(slot)


def save(tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> bytes:
    """The bytes of the safetensors file holding `tensors` (`safetensors.torch.save`): the file save_file writes
    (header padded so the data starts at 4 KiB), in memory. Tensors on any device; shared memory refused as
    save_file refuses it."""
    refuse_shared(tensors)
    header, entries = layout(tensors, metadata)
    out = bytearray(len(header) + sum(t.numel() * t.element_size() for _, t in entries))
    out[:len(header)] = header
    at = len(header)
    for _, t in entries:
        b = _as_bytes(t).cpu().numpy()
        out[at:at + b.size] = b.tobytes()
        at += b.size
    return bytes(out)


def save_file(tensors: dict[str, torch.Tensor], filename: str | os.PathLike, metadata: dict[str, str] | None = None,
              *, stats: dict | None = None) -> None:
    """Write `tensors` (on CUDA or the CPU, any mix) to `filename` as a safetensors file, durably (module doc).
    metadata: str -> str, stored as the header's __metadata__ ({} is stored as {}). Tensors that share memory
    (tied weights) are refused with a RuntimeError, as safetensors.torch.save_file refuses them: save_model
    keeps one name of each. stats (optional dict): filled with bytes, seconds, pieces (staging pieces written),
    slots (what they were: pool, torch or host; huge_slots: the setting asked for), where the time went (alloc_s,
    copy_wait_s, write_wait_s, sync_s) and the data path."""
    refuse_shared(tensors)
    write_file(tensors, filename, metadata, stats=stats)


def write_file(tensors: dict[str, torch.Tensor], filename: str | os.PathLike, metadata: dict[str, str] | None = None,
               *, stats: dict | None = None) -> None:
    """save_file without the shared-memory check (DCP's writer: its items may be views of one tensor)."""
    t0 = time.perf_counter()
    header, entries = layout(tensors, metadata)
    total = len(header) + sum(t.numel() * t.element_size() for _, t in entries)
    cudas = {t.device for _, t in entries if t.is_cuda}
    st: dict[str, Any] = {"bytes": total, "alloc_s": 0.0, "copy_wait_s": 0.0, "write_wait_s": 0.0, "pieces": 0}
    try:
        with outputs.atomic_output(filename, overwrite=True) as tmp:  # as safetensors.torch.save_file, it replaces
            fd = os.open(tmp, os.O_RDWR | os.O_CLOEXEC)
            io = None
            try:
                st["preallocated"] = _core.reserve_space(fd, 0, -(-total // ALIGN) * ALIGN)
                io = _open_io(tmp, writable=True)
                _write_stream(fd, io, header, entries, cudas, total, st)
                src = "+".join(sorted(str(d) for d in cudas))
                st["data_path"] = (f"{src} -> pinned -> " if cudas else "cpu -> ") + (
                    io.stats()["data_path"] if io is not None else "pwrite")
                if io is not None:
                    io.close()
                    io = None
                os.ftruncate(fd, total)  # safetensors requires the file to end where the last tensor ends
            finally:
                if io is not None:
                    io.close()
                os.close(fd)
            t = time.perf_counter()  # then atomic_output fsyncs the file, renames it, fsyncs the directory
        st["sync_s"] = time.perf_counter() - t
    except outputs.OutputRefused:
        raise SafetensorError(f"{os.fspath(filename)}: exists and is not a regular file; refusing to replace it") \
            from None
    st["seconds"] = time.perf_counter() - t0
    if stats is not None:
        stats.update(st)
