"""Turn user arrays into (address, byte count, owner) for the C++ core, with errors that name the value.

Accepted: NumPy arrays, PyTorch tensors (CPU; CUDA where the CUDA layer is built), and objects with the
buffer protocol (bytes for sources, bytearray/memoryview). The returned owner keeps the memory alive
while a batch uses it. torch is imported only when a tensor is passed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._index import check_ids

HOST, DEVICE = 0, 1


@dataclass
class Buffer:
    ptr: int
    nbytes: int
    kind: int  # HOST or DEVICE
    owner: Any
    device_index: int = -1


def is_tensor(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


_NARROW_INTS = {f"torch.{t}" for t in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "uint64")}


def block_ids(blocks: Any, name: str = "blocks") -> Buffer:
    """int64 block ids, 1-D and contiguous, checked by gpuio._index.check_ids (integers only, >= 0). CUDA
    tensors stay on the GPU (the GPU layer reads them there)."""
    if is_tensor(blocks) and blocks.is_cuda and str(blocks.dtype) in _NARROW_INTS:
        # converting on the GPU would launch a kernel on the caller's stream behind its back: the GPU layer
        # reads int64 ids in place, so other widths are refused (convert with .long() where it suits you)
        raise TypeError(f"{name} on the GPU must be int64, got {blocks.dtype}")
    ids = check_ids(blocks, name)
    if ids.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(ids.shape)}")
    if is_tensor(ids):
        t = ids.contiguous()
        return Buffer(t.data_ptr(), t.numel() * 8, DEVICE if t.is_cuda else HOST, t,
                      t.device.index if t.is_cuda else -1)
    arr = np.ascontiguousarray(ids)
    return Buffer(arr.ctypes.data, arr.nbytes, HOST, arr)


def data_buffer(buf: Any, nbytes: int, writable: bool, name: str) -> Buffer:
    """A contiguous buffer of exactly nbytes. writable: it is the destination of a read."""
    if is_tensor(buf):
        if not buf.is_contiguous():
            raise ValueError(f"{name} must be contiguous, got a tensor with strides {tuple(buf.stride())}")
        size = buf.numel() * buf.element_size()
        if size != nbytes:
            raise ValueError(f"{name} holds {size} bytes, expected {nbytes} (len(blocks) * block_size)")
        if buf.is_cuda:
            return Buffer(buf.data_ptr(), size, DEVICE, buf, buf.device.index)
        if buf.device.type != "cpu":
            raise ValueError(f"{name} is on device {buf.device}, expected cpu or cuda")
        return Buffer(buf.data_ptr(), size, HOST, buf)
    if not isinstance(buf, np.ndarray):
        try:
            view = memoryview(buf)
        except TypeError:
            raise TypeError(f"{name} must be a NumPy array, a tensor or a buffer, got {type(buf).__name__}") from None
        if writable and view.readonly:
            raise ValueError(f"{name} is read-only ({type(buf).__name__}); a read needs a writable buffer")
        if not view.c_contiguous:
            raise ValueError(f"{name} must be contiguous")
        buf = np.frombuffer(buf, dtype=np.uint8) if view.readonly else np.frombuffer(view, dtype=np.uint8)
    if buf.dtype.hasobject:
        raise TypeError(f"{name} has dtype {buf.dtype}, which holds Python objects, not data")
    if not buf.flags.c_contiguous:
        raise ValueError(f"{name} must be contiguous, got an array with strides {buf.strides}")
    if writable and not buf.flags.writeable:
        raise ValueError(f"{name} is read-only; a read needs a writable array")
    if buf.nbytes != nbytes:
        raise ValueError(f"{name} holds {buf.nbytes} bytes, expected {nbytes} (len(blocks) * block_size)")
    return Buffer(buf.ctypes.data, buf.nbytes, HOST, buf)

