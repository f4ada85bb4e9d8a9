"""The safetensors format: its dtypes, its header (parsed and checked once, here), and the header gpuio writes.

A file is an 8-byte little-endian header length N, N bytes of JSON (an object: tensor name -> {"dtype",
"shape", "data_offsets": [begin, end]} relative to the data, and an optional "__metadata__" of strings),
padded with spaces, then the tensors' bytes back to back: no holes, no overlaps, the file ending where the
last tensor ends. Every check that `safetensors` makes on a header is made here, each failure one line that
names the file and the value (SafetensorError, a ValueError).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import struct
from typing import Any

import torch

HEADER_BYTES_MAX = 100_000_000  # safetensors refuses longer headers (its own limit)
ALIGN_BYTES = 4096              # gpuio pads its headers so the data starts here (O_DIRECT's alignment)


class SafetensorError(ValueError):
    """A file or an argument that is not valid safetensors; the message names the file and the value."""


# name -> (bits per element, torch dtype name or None where this torch has no such dtype). Every dtype the
# safetensors format defines; sub-byte ones (F4, F6_*) as the format counts them (bits per element).
_DTYPE_BITS: dict[str, tuple[int, str | None]] = {
    "BOOL": (8, "bool"), "U8": (8, "uint8"), "I8": (8, "int8"), "U16": (16, "uint16"), "I16": (16, "int16"),
    "U32": (32, "uint32"), "I32": (32, "int32"), "U64": (64, "uint64"), "I64": (64, "int64"),
    "F16": (16, "float16"), "BF16": (16, "bfloat16"), "F32": (32, "float32"), "F64": (64, "float64"),
    "C64": (64, "complex64"),
    "F8_E4M3": (8, "float8_e4m3fn"), "F8_E5M2": (8, "float8_e5m2"), "F8_E4M3FNUZ": (8, "float8_e4m3fnuz"),
    "F8_E5M2FNUZ": (8, "float8_e5m2fnuz"), "F8_E8M0": (8, "float8_e8m0fnu"),
    "F4": (4, "float4_e2m1fn_x2"), "F6_E2M3": (6, None), "F6_E3M2": (6, None),
}
DTYPE_NAMES = tuple(_DTYPE_BITS)


def torch_dtype(name: str) -> torch.dtype | None:
    """The torch dtype of a safetensors dtype name (None where this torch lacks it)."""
    attr = _DTYPE_BITS[name][1]
    return getattr(torch, attr, None) if attr else None


def dtype_name(dtype: torch.dtype) -> str:
    """The safetensors name of a torch dtype; SafetensorError for one the format cannot store."""
    for name, (_, attr) in _DTYPE_BITS.items():
        if attr and getattr(torch, attr, None) == dtype:
            return name
    raise SafetensorError(f"dtype {dtype} has no safetensors name (the format stores {', '.join(DTYPE_NAMES)})")


def _f4_shape(name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """torch's float4_e2m1fn_x2 holds two F4 values per element: its last dimension is half the file's."""
    if name == "F4" and shape:
        return (*shape[:-1], shape[-1] // 2)
    return shape


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One tensor of a file: begin/end are absolute byte offsets in the file."""
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin

    @property
    def torch_dtype(self) -> torch.dtype:
        dt = torch_dtype(self.dtype)
        if dt is None:
            raise SafetensorError(f"tensor {self.name!r} has dtype {self.dtype}, which this torch "
                                  f"({torch.__version__}) has no dtype for")
        return dt

    @property
    def torch_shape(self) -> tuple[int, ...]:
        return _f4_shape(self.dtype, self.shape)


@dataclasses.dataclass(frozen=True)
class Header:
    path: str
    size: int                          # the file's bytes
    data_start: int                    # 8 + header length
    tensors: dict[str, TensorInfo]     # in data order
    metadata: dict[str, str] | None


def _fail(path: str, what: str) -> SafetensorError:
    return SafetensorError(f"{path}: {what}")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise SafetensorError(f"duplicate key {k!r} in the header")
        out[k] = v
    return out


def header_length(path: str, first8: bytes, size: int) -> int:
    """The header length N from the first 8 bytes, checked against the file's size and the format's limit."""
    if size < 8 or len(first8) < 8:
        raise _fail(path, f"not a safetensors file: {size} bytes, shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", first8[:8])
    if n > HEADER_BYTES_MAX:
        raise _fail(path, f"header length {n} bytes is too long (the format's limit is {HEADER_BYTES_MAX})")
    if 8 + n > size:
        raise _fail(path, f"truncated: the header length {n} needs {8 + n} bytes, the file has {size}")
    return n


def _entry(path: str, name: str, e: Any, data_start: int) -> TensorInfo:
    if not isinstance(e, dict) or not {"dtype", "shape", "data_offsets"} <= e.keys():
        raise _fail(path, f"tensor {name!r}: entry {e!r} lacks dtype, shape or data_offsets")
    dtype, shape, offs = e["dtype"], e["shape"], e["data_offsets"]
    if dtype not in _DTYPE_BITS:
        raise _fail(path, f"tensor {name!r}: unknown dtype {dtype!r} (the format has {', '.join(DTYPE_NAMES)})")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise _fail(path, f"tensor {name!r}: shape {shape!r} is not a list of integers >= 0")
    if (not isinstance(offs, list) or len(offs) != 2 or not all(type(o) is int for o in offs)
            or not 0 <= offs[0] <= offs[1]):
        raise _fail(path, f"tensor {name!r}: data_offsets {offs!r} is not [begin, end] with 0 <= begin <= end")
    bits = math.prod(shape) * _DTYPE_BITS[dtype][0]
    if bits % 8 or bits // 8 != offs[1] - offs[0]:
        raise _fail(path, f"tensor {name!r}: shape {shape} of {dtype} is {bits / 8:g} bytes, its data_offsets "
                          f"{offs} span {offs[1] - offs[0]}")
    return TensorInfo(name, dtype, tuple(shape), data_start + offs[0], data_start + offs[1])


def parse_header(path: str, raw: bytes, size: int) -> Header:
    """Parse and check the header `raw` (the N bytes after the length) of a file of `size` bytes."""
    data_start = 8 + len(raw)
    if not raw.lstrip(b" ").startswith(b"{"):
        raise _fail(path, "the header is not a JSON object")
    try:
        head = json.loads(raw, object_pairs_hook=_no_duplicates)
    except SafetensorError as e:
        raise _fail(path, str(e)) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise _fail(path, f"the header is not valid JSON ({e})") from None
    meta = head.pop("__metadata__", None)
    if meta is not None and (not isinstance(meta, dict)
                             or not all(isinstance(v, str) for v in meta.values())):
        raise _fail(path, f"__metadata__ {meta!r} is not a mapping of strings to strings")
    infos = sorted((_entry(path, name, e, data_start) for name, e in head.items()),
                   key=lambda t: (t.begin, t.end))
    at = data_start
    for prev, t in zip([None] + infos[:-1], infos):
        if t.begin < at:
            raise _fail(path, f"tensors {prev.name!r} {[prev.begin - data_start, prev.end - data_start]} and "
                              f"{t.name!r} {[t.begin - data_start, t.end - data_start]} overlap")
        if t.begin > at:
            raise _fail(path, f"a hole of {t.begin - at} bytes before tensor {t.name!r} (data_offsets "
                              f"{[t.begin - data_start, t.end - data_start]}): the format packs tensors back to back")
        at = t.end
    if at > size:
        raise _fail(path, f"truncated: the tensors end at byte {at}, the file has {size}")
    if at < size:
        raise _fail(path, f"{size - at} bytes past the end of the last tensor (byte {at}); not a safetensors file")
    return Header(path, size, data_start, {t.name: t for t in infos}, meta)


def read_header(fd: int, path: str) -> Header:
    """The checked header of the open file fd (path names it in errors)."""
    size = os.fstat(fd).st_size
    n = header_length(path, os.pread(fd, 8, 0), size)
    raw = os.pread(fd, n, 8)
    if len(raw) != n:
        raise _fail(path, f"truncated while reading its {n}-byte header")
    return parse_header(path, raw, size)


def header_bytes(entries: list[tuple[str, str, tuple[int, ...], int]], metadata: dict[str, str] | None,
                 align: int = ALIGN_BYTES) -> tuple[bytes, list[int]]:
    """The header of a file holding `entries` [(name, dtype name, shape, nbytes)] packed in that order: the
    8-byte length and the JSON padded with spaces so the data starts at a multiple of `align`; and each
    entry's data offset relative to the data."""
    head: dict[str, Any] = {}
    if metadata is not None:  # {} is written as {} and reads back as {} (as safetensors does); None: no entry
        if not isinstance(metadata, dict):
            raise SafetensorError(f"metadata must be a dict of str to str, got {type(metadata).__name__}")
        bad = {k: v for k, v in metadata.items() if not isinstance(k, str) or not isinstance(v, str)}
        if bad:
            raise SafetensorError(f"metadata must map str to str; {next(iter(bad.items()))!r} does not")
        head["__metadata__"] = dict(metadata)
    offsets, off = [], 0
    for name, dtype, shape, nbytes in entries:
        head[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + nbytes]}
        offsets.append(off)
        off += nbytes
    text = json.dumps(head, separators=(",", ":")).encode()
    total = -(-(8 + len(text)) // align) * align
    text += b" " * (total - 8 - len(text))
    return struct.pack("<Q", len(text)) + text, offsets
