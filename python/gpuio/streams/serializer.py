"""Lightweight serializer: a record is ``header | meta | payload``.

Arrays and tensors go as raw bytes after a small header (dtype, shape): the writer copies them straight
from their memory (host or GPU) into the stream buffer, with no intermediate copy. Other objects go
through pickle protocol 5; their large buffers (NumPy arrays inside a dict, say) travel out of band and
are copied once, like arrays. Bytes-likes go raw.

Encoding returns the header bytes and a list of payload *segments*; decoding pulls from a *source*
(the stream reader) that provides ``read_bytes(n)``, ``read_into(uint8 array)`` and ``consume(n, fn)``.
"""
from __future__ import annotations

import pickle
import struct
import sys
from typing import Any, Protocol, runtime_checkable

import numpy as np

RECORD_MAGIC = 0x5352  # "RS"
KIND_NDARRAY, KIND_TORCH, KIND_PICKLE, KIND_BYTES = 1, 2, 3, 4
FLAG_BYTEARRAY = 1
_HDR = struct.Struct("<HBBIQ")  # magic kind flags meta_len payload_len
HEADER_BYTES = _HDR.size
META_BYTES_MAX = 1 << 20


@runtime_checkable
class FencedSource(Protocol):
    """A record source whose buffer slots an asynchronous copy may still read (the stream reader): fence(f)
    holds the current slot until f (a torch.cuda.Event) has passed."""

    def fence(self, f: Any) -> None:
        ...


class RecordCorrupt(ValueError):
    pass


class HostSegment:
    """Payload bytes that live in host memory (anything with the buffer protocol)."""
    __slots__ = ("array", "nbytes")

    def __init__(self, buf):
        self.array = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf
        self.nbytes = self.array.nbytes

    def copy_into(self, dst: np.ndarray, offset: int) -> None:
        np.copyto(dst, self.array[offset:offset + dst.size])


class TorchSegment:
    """Payload bytes of a contiguous torch tensor on any device; copied by torch (GPU -> host by DMA)."""
    __slots__ = ("flat", "nbytes")

    def __init__(self, tensor):
        import torch
        self.flat = tensor.reshape(-1).view(torch.uint8)
        self.nbytes = int(self.flat.numel())

    def copy_into(self, dst: np.ndarray, offset: int) -> None:
        import torch
        torch.from_numpy(dst).copy_(self.flat[offset:offset + dst.size])


def _is_torch_tensor(obj) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _shape_meta(dtype_name: str, shape) -> bytes:
    name = dtype_name.encode("ascii")
    return struct.pack(f"<HB{len(name)}s{len(shape)}Q", len(name), len(shape), name, *shape)


def _shape_unmeta(meta: bytes) -> tuple[str, tuple[int, ...]]:
    (name_len, ndim) = struct.unpack_from("<HB", meta)
    name = meta[3:3 + name_len].decode("ascii")
    shape = struct.unpack_from(f"<{ndim}Q", meta, 3 + name_len)
    return name, tuple(shape)


def encode(obj) -> tuple[bytes, list]:
    """Header (with meta) and payload segments of ``obj``."""
    if isinstance(obj, np.ndarray) and not obj.dtype.hasobject and obj.dtype.fields is None:
        arr = obj if obj.flags.c_contiguous else np.ascontiguousarray(obj)
        meta = _shape_meta(arr.dtype.str, arr.shape)
        segs: list = [HostSegment(arr.reshape(-1).view(np.uint8))] if arr.nbytes else []
        return _header(KIND_NDARRAY, 0, meta, arr.nbytes), segs
    if _is_torch_tensor(obj) and not obj.is_sparse:
        t = obj.detach()
        t = t if t.is_contiguous() else t.contiguous()
        meta = _shape_meta(str(t.dtype).removeprefix("torch."), tuple(t.shape))
        nbytes = t.numel() * t.element_size()
        segs = [TorchSegment(t)] if nbytes else []
        return _header(KIND_TORCH, 0, meta, nbytes), segs
    if isinstance(obj, (bytes, bytearray)):
        flags = FLAG_BYTEARRAY if isinstance(obj, bytearray) else 0
        return _header(KIND_BYTES, flags, b"", len(obj)), ([HostSegment(obj)] if obj else [])
    buffers: list[pickle.PickleBuffer] = []
    body = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    lengths = [len(body)] + [r.nbytes for r in raws]
    meta = struct.pack(f"<I{len(lengths)}Q", len(raws), *lengths)
    segs = [HostSegment(body)] + [HostSegment(r) for r in raws if r.nbytes]
    return _header(KIND_PICKLE, 0, meta, sum(lengths)), segs


def _header(kind: int, flags: int, meta: bytes, payload_len: int) -> bytes:
    if len(meta) > META_BYTES_MAX:
        raise ValueError(f"record metadata of {len(meta)} B exceeds {META_BYTES_MAX} B")
    return _HDR.pack(RECORD_MAGIC, kind, flags, len(meta), payload_len) + meta


def decode(src, device=None):
    """Reads one record from ``src``. Tensors land on ``device`` (None: where numpy/CPU torch put them)."""
    magic, kind, flags, meta_len, payload_len = _HDR.unpack(src.read_bytes(HEADER_BYTES))
    if magic != RECORD_MAGIC or meta_len > META_BYTES_MAX:
        raise RecordCorrupt(f"bad record header (magic {magic:#x}, meta {meta_len} B) in stream")
    meta = src.read_bytes(meta_len)
    if kind == KIND_NDARRAY:
        dtype_str, shape = _shape_unmeta(meta)
        if device is not None:  # a torch tensor on `device`, filled straight from the stream buffer
            import torch
            dtype = torch.from_numpy(np.empty(0, dtype=np.dtype(dtype_str))).dtype
            return _torch_payload(src, torch.empty(shape, dtype=dtype, device=device), payload_len)
        out = np.empty(shape, dtype=np.dtype(dtype_str))
        _expect(out.nbytes, payload_len)
        src.read_into(out.reshape(-1).view(np.uint8))
        return out
    if kind == KIND_TORCH:
        import torch
        dtype_name, shape = _shape_unmeta(meta)
        return _torch_payload(src, torch.empty(shape, dtype=getattr(torch, dtype_name), device=device or "cpu"),
                              payload_len)
    if kind == KIND_BYTES:
        data = bytearray(payload_len)
        if payload_len:
            src.read_into(np.frombuffer(data, dtype=np.uint8))
        return data if flags & FLAG_BYTEARRAY else bytes(data)
    if kind == KIND_PICKLE:
        (nbuf,) = struct.unpack_from("<I", meta)
        lengths = struct.unpack_from(f"<{nbuf + 1}Q", meta, 4)
        _expect(sum(lengths), payload_len)
        parts = [bytearray(n) for n in lengths]
        for p in parts:
            if len(p):
                src.read_into(np.frombuffer(p, dtype=np.uint8))
        return pickle.loads(parts[0], buffers=parts[1:])
    raise RecordCorrupt(f"unknown record kind {kind} in stream")


def _torch_payload(src, out, payload_len: int):
    """Fills tensor ``out`` with the record's payload. CUDA: each stream-buffer chunk is copied to the
    device as it is consumed, queued on the current stream (DMA once the store pinned its pool); a recorded
    event fences the slot, so the reader reuses it only after the copy (reader.py, "Fences")."""
    import torch
    _expect(out.numel() * out.element_size(), payload_len)
    flat = out.reshape(-1).view(torch.uint8)
    if flat.is_cuda:
        fence = src.fence if isinstance(src, FencedSource) else None

        def put(chunk: np.ndarray, offset: int) -> None:
            if fence is None:  # a source without fences: the copy must be over when this returns
                flat[offset:offset + chunk.size].copy_(torch.from_numpy(chunk))
                return
            flat[offset:offset + chunk.size].copy_(torch.from_numpy(chunk), non_blocking=True)
            ev = torch.cuda.Event()
            ev.record()
            fence(ev)
        src.consume(payload_len, put)
    elif payload_len:
        src.read_into(flat.numpy())
    return out


def _expect(nbytes: int, payload_len: int) -> None:
    if nbytes != payload_len:
        raise RecordCorrupt(f"record payload is {payload_len} B but its header describes {nbytes} B")

__all__ = ["RECORD_MAGIC", "KIND_NDARRAY", "KIND_TORCH", "KIND_PICKLE", "KIND_BYTES", "FLAG_BYTEARRAY", "HEADER_BYTES",
           "META_BYTES_MAX", "FencedSource", "RecordCorrupt", "HostSegment", "TorchSegment", "encode", "decode"]
