"""The one check every id argument goes through: engine block ids, TensorFile row ids, cache and PyG indices.

    ids = check_ids(x, "blocks")               # int64 NumPy array (or int64 torch tensor, on its device)
    ids = check_ids(x, "row ids", upper=n)     # also in [0, n), else IndexError naming min and max

Accepted: integer Python objects (int, NumPy integer scalars), lists/tuples/ranges of them, NumPy arrays
and torch tensors of an integer dtype. Refused with TypeError naming the argument and the value:

- floats, even integral ones (1.0) and NaN: a float id is almost always an arithmetic slip (x / 2 for
  x // 2), and truncating it silently reads the wrong row;
- bools and bool arrays/tensors: NumPy and PyTorch read a bool array as a mask, not as ids 0 and 1, so
  accepting them as ids would mean the opposite of what the caller likely meant (use ``nonzero()``);
- anything else (strings, objects, complex numbers).

Unsigned arrays are accepted when every value fits int64. The result keeps the input's shape; callers that
want 1-D flatten or refuse other shapes themselves. torch is imported only when a tensor is passed.

`row_ids(key, n)` turns a torch-style row index (int, slice, mask, index tensor of any shape) into flat ids
and the result's leading shape: TensorFile's `tf[key]` and the PyG stores' indices.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

_INT64_MAX = np.iinfo(np.int64).max
_SHORT = 64  # ids up to this many are range-checked through a Python list (cheaper than NumPy's min/max calls)


def _is_tensor(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _first_bad(flat) -> tuple[int, Any] | None:
    """Position and value of the first element that is not an integer (bools count as not)."""
    for i, v in enumerate(flat):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            return i, v
    return None


def _check_range(lo: int, hi: int, name: str, upper: int | None) -> None:
    if lo < 0 or (upper is not None and hi >= upper):
        bound = f"[0, {upper})" if upper is not None else ">= 0"
        raise IndexError(f"{name} must lie in {bound}, got min {lo}, max {hi}")


def check_ids(x: Any, name: str = "ids", upper: int | None = None):
    """x as int64 ids (NumPy array, or torch tensor for tensor input), refusing non-integers by name.

    upper: when given, every id must lie in [0, upper) (IndexError otherwise); ids are always >= 0.
    """
    if _is_tensor(x):
        import torch

        if x.dtype == torch.bool or x.is_floating_point() or x.is_complex():
            raise TypeError(f"{name} must be an integer tensor, got dtype {x.dtype}")
        t = x.long() if x.dtype != torch.int64 else x  # uint64 above int64 wraps negative: refused below
        # GPU-resident engine block ids (upper None) are range-checked by the engine on the CPU when the
        # publish kernel hands them over (IndexError from wait()): reading min/max here would synchronise the
        # caller's stream, which the stream-ordered API must never do, and fail inside CUDA graph capture.
        if t.numel() and not (t.is_cuda and upper is None):
            _check_range(int(t.min()), int(t.max()), name, upper)
        return t
    if isinstance(x, np.ndarray):
        arr = x
    elif isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer, list, tuple, range)):
        kind = "bool" if isinstance(x, (bool, np.bool_)) else type(x).__name__
        raise TypeError(f"{name} must be integer ids (int, list of ints, integer array or tensor), "
                        f"got {kind} {x!r}"[:300])
    elif isinstance(x, range):
        arr = np.arange(x.start, x.stop, x.step, dtype=np.int64)
    else:
        try:
            obj = np.asarray(x, dtype=object)
        except ValueError as e:  # ragged nesting
            raise TypeError(f"{name} must be a flat list of ints, got {x!r}"[:300]) from e
        bad = _first_bad(obj.reshape(-1))
        if bad is not None:
            i, v = bad
            raise TypeError(f"{name} must hold integers (not {type(v).__name__}), got {v!r} at position {i}")
        try:
            arr = obj.astype(np.int64) if obj.size else np.zeros(obj.shape, dtype=np.int64)
        except OverflowError:
            raise IndexError(f"{name} holds a value outside int64: {max(obj.reshape(-1), key=abs)}") from None
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "O":  # an object array: judge it element by element, like a list
            return check_ids(arr.tolist() if arr.ndim else arr.item(), name, upper)
        raise TypeError(f"{name} must be an integer array, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > _INT64_MAX:
        raise IndexError(f"{name} holds {int(arr.max())}, above the largest id {_INT64_MAX}")
    out = arr.astype(np.int64, copy=False)
    if 0 < out.size <= _SHORT:  # a one-block read's critical path: two NumPy reductions cost ~6x a list's min/max
        vals = out.ravel().tolist()
        _check_range(min(vals), max(vals), name, upper)
    elif out.size:
        _check_range(int(out.min()), int(out.max()), name, upper)
    return out


def row_ids(key, num_rows: int) -> tuple[torch.Tensor, tuple | None]:
    """A torch-style row index over `num_rows` rows -> (flat int64 ids in [0, num_rows), on the key's
    device; the result's leading shape, or None for a single int, whose row comes without a leading dim).
    key: int (negative counts from the end), slice (step > 0), integer tensor/ndarray/list of any shape
    (the result has the index's shape), or a 1-D bool mask of num_rows entries."""
    import torch

    n = int(num_rows)
    if isinstance(key, (bool, np.bool_)):
        raise TypeError(f"row index must be an int, slice, or integer/bool tensor, got {key!r}")
    if isinstance(key, (int, np.integer)):
        i = int(key)
        if not -n <= i < n:
            raise IndexError(f"row {i} is out of range for {n} rows")
        return torch.tensor([i % n]), None
    if isinstance(key, slice):
        if key.step is not None and key.step <= 0:
            raise ValueError(f"slice step must be positive (as in torch), got {key.step}")
        start, stop, step = key.indices(n)
        ids = torch.arange(start, max(start, stop), step)
        return ids, tuple(ids.shape)
    if isinstance(key, np.ndarray):
        t = torch.from_numpy(key)
    elif isinstance(key, torch.Tensor):
        t = key
    elif isinstance(key, (list, range)):
        t = torch.as_tensor(key) if len(key) else torch.empty(0, dtype=torch.long)
    else:
        raise TypeError(f"row index must be an int, slice, or integer/bool tensor, got {type(key).__name__}")
    if t.dtype == torch.bool:
        if tuple(t.shape) != (n,):
            raise IndexError(f"a bool row mask needs shape ({n},), got {tuple(t.shape)}")
        ids = t.nonzero().flatten()
        return ids, tuple(ids.shape)
    if t.is_floating_point() or t.is_complex():
        raise TypeError(f"row index must hold integers or bools, got dtype {t.dtype}")
    if t.dim() == 0:
        return row_ids(int(t), n)
    t = t.long()
    if t.numel():
        lo, hi = int(t.min()), int(t.max())
        if lo < -n or hi >= n:
            raise IndexError(f"row {lo if lo < -n else hi} is out of range for {n} rows")
    return torch.where(t < 0, t + n, t).flatten(), tuple(t.shape)
