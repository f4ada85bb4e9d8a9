"""What the Python layer does to user arrays before a binding takes them. The bindings take nb::ndarray
(cpp/src/bindings/arrays.hpp): nanobind imports NumPy arrays and tensors through DLPack and bytes, bytearray
and memoryview through the buffer protocol, and the binding checks dtype, shape, contiguity, host or CUDA
memory, read-only memory and the byte count, raising one line that names the argument ("blocks must be
int64, got int32", "out is read-only (bytes); a read needs a writable buffer", "out holds 100 bytes,
expected 4096 (len(blocks) * block_size)"). Left here is only what nanobind cannot do:

- block ids: lists, ranges and host arrays/tensors of any integer dtype go through gpuio._index.check_ids
  (the one index check: floats and bools refused by name, ids >= 0) and become contiguous int64 on the host.
  Ids in CUDA memory pass as they are: converting them would launch a kernel on the caller's stream behind
  its back, so the binding refuses any dtype but int64 there (convert with .long() where it suits you).
- tensors that require grad are detached (torch refuses to export them through DLPack; detach() shares the
  memory).
- cuda_device(): which GPU an argument lives on, so gpuio.Engine sends it to its GPU path.

bytes are read-only: a source for writes, refused as the destination of a read. The caller's handle (or the
binding's keep-alive) holds what was passed until the request is done with it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ._index import check_ids

_CUDA_DLPACK = (2, 13)  # DLPack device types of CUDA memory: device, managed


def is_tensor(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def cuda_device(x: Any) -> int:
    """The CUDA device index x lives on, or -1 for host memory (and for whatever is no array at all)."""
    if type(x) is np.ndarray:
        return -1
    if is_tensor(x):
        return x.get_device() if x.is_cuda else -1  # an int, where x.device makes a torch.device object
    dev = getattr(x, "__dlpack_device__", None)
    if dev is None or isinstance(x, np.ndarray):
        return -1
    kind, index = dev()
    return int(index) if int(kind) in _CUDA_DLPACK else -1


def block_ids(blocks: Any, name: str = "blocks") -> Any:
    """blocks as a binding takes them: CUDA tensors as given, everything else checked by check_ids and made
    contiguous int64 on the host (a NumPy array, or a CPU tensor for tensor input)."""
    if is_tensor(blocks) and blocks.is_cuda:
        return blocks
    ids = check_ids(blocks, name)
    if is_tensor(ids):
        return ids.contiguous()
    return ids if ids.flags.c_contiguous else ids.copy()


def data_array(buf: Any) -> Any:
    """buf as a binding takes it: tensors that require grad detached, everything else as given."""
    if is_tensor(buf) and buf.requires_grad:
        return buf.detach()
    return buf
