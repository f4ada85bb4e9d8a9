"""TensorFile's writes (gpuio.tensor): `scatter` (what `tf[idx] = rows` calls) and its exact cast, as a mixin of
TensorFile, with the helpers both sides use: the table policy from C++ and 4 KiB-aligned buffers. Kept apart so
each file stays readable; TensorFile is the only class that mixes it in, and its docstring states the contract
(concurrent writers, durability)."""
from __future__ import annotations

import functools

import numpy as np
import torch

from gpuio import _pinned
from gpuio.defaults import defaults_of

DATA_ALIGN_BYTES = 4096  # the data offset is at least this, and a multiple of block_size


@functools.cache
def _table_policy() -> dict:
    """The engine's policy for a table on this machine, from C++ (limits.hpp; why these values: there):
    `workers`, the engine workers unless engine_options name them; `batch_blocks_max`, the most blocks
    one engine request of a gather or scatter holds (gpuio.defaults' table rows)."""
    return defaults_of("table")


def _aligned_bytes(nbytes: int, pin: bool) -> torch.Tensor:
    """uint8 buffer whose address is 4 KiB aligned (O_DIRECT can then target it without a bounce): gpuio's
    aligned_empty, or (pin) page-locked memory from torch's allocator, which tracks it for async copies."""
    if not pin:
        from gpuio.engine import aligned_empty

        return torch.from_numpy(aligned_empty(nbytes, DATA_ALIGN_BYTES))
    return _pinned.torch_pinned(nbytes, DATA_ALIGN_BYTES)


class TableWrites:
    """The write side of gpuio.TensorFile (see its docstring): needs the file's layout (shape, dtypes, row plan,
    block locks, engine) that TensorFile sets up."""

    def scatter(self, idx, rows, exact: bool = False) -> None:
        """Write `rows` (tensor, ndarray or nested lists) at row ids `idx`; with duplicate ids the last
        occurrence wins. Rows of another real dtype are cast to the file's as torch's `copy_` casts them
        (`tf[idx] = rows` is this call): float64 into float32 or bfloat16 rounds, float into int truncates.
        Complex rows into a real file are refused (torch would drop the imaginary part). exact=True
        refuses, with TypeError naming the value and its row, any value the cast would change
        (1.0000000001 into float32, 2**40 into int32, 1e300 into float32's inf, 0.1 into bfloat16; NaN
        stays NaN and passes), and writes nothing. Safe under concurrent callers (see the class
        docstring); durable after sync() or close()."""
        if not self.writable:
            raise ValueError(f"{self.path} is open read-only; open it with mode='r+'")
        self._this_process()
        ids = self._index(idx)
        vals = torch.from_numpy(np.asarray(rows)) if not isinstance(rows, torch.Tensor) else rows
        if tuple(vals.shape) != (ids.numel(), *self.shape[1:]):
            raise ValueError(f"rows has shape {tuple(vals.shape)}, expected {(ids.numel(), *self.shape[1:])}")
        if vals.is_complex() and not self.torch_dtype.is_complex:
            raise TypeError(f"rows of dtype {vals.dtype} are complex and {self.path} holds {self.torch_dtype}: "
                            f"take .real (or .abs()) first")
        if ids.numel() == 0 or self.row_bytes == 0:
            return
        vals = vals.to("cpu").reshape(ids.numel(), -1)
        vals = (self._exact_cast(vals) if exact else vals.to(self.torch_dtype)).view(self._moved)
        ids = ids.cpu()
        uniq, inv = torch.unique(ids, return_inverse=True)
        last = torch.full((uniq.numel(),), -1, dtype=torch.long).scatter_reduce_(
            0, inv, torch.arange(ids.numel()), "amax")
        ids, vals = uniq, vals[last]
        blocks, pos = self._plan(ids)
        staging = _aligned_bytes(blocks.numel() * self.block_size, pin=False).zero_()  # padding stays 0
        partial = ~self._fully_covered(ids, blocks)
        elems = staging.view(self._moved)
        flat = (pos[:, None] + torch.arange(self.row_elems)).flatten()
        ids_np = (blocks + self._engine_base).numpy()
        # Read-modify-write under the blocks' stripe locks: a scatter to other rows of the same block
        # cannot slip between our read of it and our write of it (without them writes were lost:
        # docs/decisions/0004).
        with self._locks.writing(self._locks.stripes_of(blocks.numpy())):
            if bool(partial.any()):  # read-modify-write only the blocks the rows do not cover whole
                old = _aligned_bytes(int(partial.sum()) * self.block_size, pin=False)
                for h in self._read_into(blocks[partial], old):
                    h.wait()
                staging.view(-1, self.block_size)[partial] = old.view(-1, self.block_size)
            elems.index_copy_(0, flat, vals.flatten())
            step = _table_policy()["batch_blocks_max"]
            for lo in range(0, blocks.numel(), step):
                hi = min(lo + step, blocks.numel())
                self.engine.write(ids_np[lo:hi], staging[lo * self.block_size:hi * self.block_size])
        self._count(scatters=1, rows_scattered=ids.numel(), blocks_written=blocks.numel())

    def _exact_cast(self, vals: torch.Tensor) -> torch.Tensor:
        """vals in the file's dtype, or TypeError naming the first value the cast changes ("lossy": it does
        not come back equal when cast back; NaN counts as equal to NaN)."""
        out = vals.to(self.torch_dtype)
        if vals.dtype == self.torch_dtype or vals.dtype == torch.bool:
            return out
        back = out.to(vals.dtype)
        same = back == vals
        if vals.is_floating_point() or vals.is_complex():
            same |= torch.isnan(back) & torch.isnan(vals)
        if not (out.is_floating_point() or out.is_complex() or out.dtype == torch.bool):  # integer wrap-around
            if not vals.dtype.is_signed:
                same &= out >= 0  # 200 as uint8 into int8 comes back 200 but is stored as -56
            elif not self.torch_dtype.is_signed:
                same &= vals >= 0  # -1 into uint64 comes back -1 but is stored as 2**64 - 1
        if not bool(same.all()):
            bad = torch.nonzero(~same)[0].tolist()
            raise TypeError(f"rows[{bad[0]}, {bad[1]}] = {vals[bad[0], bad[1]].item()!r} changes to "
                            f"{out[bad[0], bad[1]].item()!r} when stored as {self.torch_dtype} (lossy, "
                            f"exact=True); without exact=True, scatter casts as torch's copy_ does")
        return out
