"""Element types of gpuio's tables: torch dtypes and NumPy names alike, bfloat16 included.

`element_type(spec)` takes `torch.bfloat16`, `"bfloat16"`, `torch.float16`, `"float16"`, `np.float32`,
`"float32"`, `np.dtype("<i8")`, `torch.int64`, `"torch.int64"`, ... and gives one `ElementType`: its
name, the torch dtype gpuio reads and writes, and the NumPy dtype of the stored elements. Strings are
NumPy's names (so "float" is NumPy's float64, "half" float16), plus "bfloat16" and "torch.NAME".

NumPy has no bfloat16: a bfloat16 table stores the raw 16-bit words (descr '<u2', little-endian, the
same bytes torch and safetensors hold) and names its element type in a header comment that NumPy skips
(gpuio._npy, STORED_AS). np.load gives the words as uint16 (`torch.from_numpy(a).view(torch.bfloat16)`
recovers the values); gpuio gives bfloat16. A uint16 table carries no comment and stays uint16.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from gpuio._npy import STORED_AS

if TYPE_CHECKING:
    import torch

EXAMPLES = "torch.bfloat16, 'bfloat16', torch.float16, 'float32', np.float32, torch.int64, 'uint8', 'bool'"
_NUMPY_TYPES = "?", "<u1", "<i1", "<i2", "<i4", "<i8", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8", "<c8", "<c16"


class ElementType(NamedTuple):
    name: str  # "float32", "bfloat16": torch's name without "torch."
    torch: "torch.dtype"  # what gpuio reads and writes
    numpy: np.dtype  # the stored elements as NumPy reads them (uint16 for bfloat16), little-endian
    element: str | None  # the header comment's name where NumPy lacks the type (a STORED_AS key), else None


@functools.cache
def _numpy_of_torch() -> dict:
    """torch dtype -> the NumPy dtype torch.from_numpy maps to it (the types with a NumPy form here)."""
    import torch

    out = {}
    for t in _NUMPY_TYPES:
        try:
            out[torch.from_numpy(np.empty(0, t)).dtype] = np.dtype(t)
        except TypeError:  # an older torch without unsigned 16/32/64-bit types
            pass
    return out


def _refuse(what: str, spec, why: str = ""):
    raise TypeError(f"{what} {spec!r} is not an element type gpuio stores{why}: give a torch dtype or a "
                    f"NumPy name ({EXAMPLES}, ...)")


def element_type(spec, what: str = "dtype") -> ElementType:
    """The ElementType `spec` names; TypeError (ValueError for a big-endian dtype) naming it otherwise.
    `what` names the argument in the message."""
    import torch

    if isinstance(spec, ElementType):
        return spec
    if isinstance(spec, str) and spec.startswith("torch."):
        named = getattr(torch, spec[len("torch."):], None)
        if not isinstance(named, torch.dtype):
            _refuse(what, spec, " (no such torch dtype)")
        spec = named
    if isinstance(spec, torch.dtype):
        name = str(spec).removeprefix("torch.")
        if name in STORED_AS:
            return ElementType(name, spec, STORED_AS[name], name)
        if spec not in _numpy_of_torch():  # float8, complex32, quantized types
            _refuse(what, spec, " (NumPy has no such type and gpuio has no stored form for it)")
        return ElementType(name, spec, _numpy_of_torch()[spec], None)
    if isinstance(spec, str) and spec in STORED_AS:
        return element_type(getattr(torch, spec), what)
    if spec is None or isinstance(spec, bool):
        _refuse(what, spec)  # np.dtype(None) would be float64: a missing dtype is not a choice
    try:
        dt = np.dtype(spec)
    except (TypeError, ValueError, SyntaxError):
        _refuse(what, spec)
    if dt.fields is not None or dt.subdtype is not None or dt.kind not in "biufc" or dt.itemsize == 0:
        _refuse(what, spec, f" (NumPy {dt.str}: not a number or bool)")
    if dt.byteorder == ">" or (dt.byteorder == "=" and not np.little_endian):
        raise ValueError(f"{what} {spec!r} is big-endian; gpuio stores little-endian data (use "
                         f"{dt.newbyteorder('<').str!r})")
    dt = dt.newbyteorder("<")
    found = [t for t, d in _numpy_of_torch().items() if d == dt]
    if not found:
        _refuse(what, spec, " (torch has no such type)")
    return ElementType(str(found[0]).removeprefix("torch."), found[0], dt, None)


def moved_as(t: "torch.dtype") -> "torch.dtype":
    """A torch dtype of t's size whose kernels move every element: gathers and scatters view their bytes as
    it, since torch's uint16/uint32/uint64 lack index_select, index_copy_ and indexing (the same bytes)."""
    import torch

    return {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}.get(t, t)


def stored_numpy(values: "torch.Tensor", et: ElementType) -> np.ndarray:
    """`values` (already of et's torch dtype, on the CPU) as a NumPy array of the stored elements: the
    same bytes, as uint16 words for bfloat16."""
    import torch

    if et.element is not None:
        values = values.view(torch.from_numpy(np.empty(0, et.numpy)).dtype)
    return values.numpy()
