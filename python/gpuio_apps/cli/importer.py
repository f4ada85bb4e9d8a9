"""`gpuio import SRC DST`: convert a .npy, .pt or raw binary file into a gpuio TensorFile (block-aligned
.npy), streaming in chunks with a progress bar, so tables larger than memory convert too (.npy and raw
are memory-mapped; a .pt file is loaded whole, as torch.load requires). Every input is checked before
the first byte is written (see _check.py). The element type is kept bit for bit: a bfloat16 .pt (or a
gpuio bfloat16 .npy, or raw data with --dtype bfloat16) becomes a bfloat16 TensorFile (stored as uint16
words, see gpuio._dtypes); a big-endian .npy is converted to little-endian."""
from __future__ import annotations

import math
import os

import numpy as np
import typer

from . import _check, _knobs

CHUNK_BYTES = 64 << 20  # bytes converted per step: bounds memory use


def _source(src: str, dtype: str | None, shape: str | None):
    """(the source's elements: a NumPy memmap or, for .pt, a torch tensor; their gpuio ElementType)."""
    ext = os.path.splitext(src)[1].lower()
    if ext in (".npy", ".pt", ".pth"):
        for option, value in (("--dtype", dtype), ("--shape", shape)):
            if value is not None:
                _check.fail(option, value, f"only for raw sources; {src} is a {ext} file, which names its own")
        if ext == ".npy":
            arr = _check.npy_source("SRC", src)
            return arr, _check.npy_element("SRC", src, arr.dtype)
        t = _check.pt_source("SRC", src)
        return t, _check.dtype("SRC", t.dtype)
    if dtype is None:
        _check.fail("SRC", src, "is not .npy/.pt: give --dtype (and --shape) for raw data")
    et = _check.dtype("--dtype", dtype)
    dims = _check.raw_shape("--shape", shape, os.path.getsize(src), et.numpy, src)
    if not all(dims):
        _check.fail("SRC", src, "is empty: nothing to import")
    return np.memmap(src, dtype=et.numpy, mode="r", shape=dims), et


def import_(src: str = typer.Argument(..., help="source file: .npy, .pt, or raw"),
            dst: str = typer.Argument(..., help="TensorFile to create (.npy); written under a temporary name in "
                                                "its folder and renamed when complete, so a failed import leaves "
                                                "nothing"),
            dtype: str = typer.Option(None, help="element type of a raw source: a NumPy name or bfloat16 "
                                                 "(e.g. float32, bfloat16, float16, int64)"),
            shape: str = typer.Option(None, help="shape of a raw source, e.g. 1000000,128 (-1 once allowed); "
                                                 "must hold exactly the file's elements"),
            block_size: int = _knobs.option("import", "block_size", help="block size of the TensorFile"),
            force: bool = typer.Option(False, "--force", help="replace DST if it exists (never a device, fifo or "
                                                              "directory)")) -> None:
    _check.input_file("SRC", src)
    _knobs.check("--block-size", "block_size", block_size)
    _check.output_file("DST", dst, force)
    if os.path.exists(dst) and os.path.samefile(src, dst):
        _check.fail("DST", dst, "is the source file")
    _check.need("torch", "gpuio import")
    arr, et = _source(src, dtype, shape)
    if arr.ndim == 0:
        _check.fail("SRC", src, "holds a scalar; a TensorFile needs at least one dimension")

    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from gpuio.tensor import file_bytes
    _check.data_space("DST", dst, dst, file_bytes(tuple(arr.shape), et, block_size))
    with Progress(TextColumn(f"{os.path.basename(src)} -> {os.path.basename(dst)}"), BarColumn(), DownloadColumn(),
                  TransferSpeedColumn()) as bar:
        task = bar.add_task("import", total=math.prod(arr.shape) * et.numpy.itemsize)
        offset = convert(arr, et, dst, block_size, force, progress=lambda n: bar.advance(task, n))
    typer.echo(f"{dst}: shape {tuple(arr.shape)}, dtype {et.name}, data at byte {offset}")


def convert(arr, et, dst: str, block_size: int = 4096, overwrite: bool = False, progress=None,
            chunk_bytes: int = CHUNK_BYTES) -> int:
    """Writes `arr` (a NumPy array or memmap, converted without loading it whole, or a torch tensor) of gpuio
    element type `et` into a new TensorFile at `dst`, `chunk_bytes` of rows at a time; progress(bytes) after
    each chunk. Through gpuio.outputs.atomic_output: free space checked first, and a failure (ENOSPC, Ctrl-C)
    leaves no file at `dst` (an old one stays as it was). Returns the TensorFile's data offset."""
    import torch

    from gpuio import outputs
    from gpuio.tensor import TensorFile, file_bytes
    shape = tuple(arr.shape)
    row_bytes = max(1, math.prod(shape[1:]) * et.numpy.itemsize)
    step = max(1, chunk_bytes // row_bytes)
    with outputs.atomic_output(dst, overwrite=overwrite, need_bytes=file_bytes(shape, et, block_size)) as tmp, \
            TensorFile.create(tmp, shape, et, block_size=block_size, overwrite=True) as tf:
        for lo in range(0, shape[0], step):
            hi = min(lo + step, shape[0])
            rows = arr[lo:hi]  # the stored bits (bfloat16 from uint16 words by a view, never a value cast)
            if not isinstance(rows, torch.Tensor):
                rows = torch.from_numpy(np.array(rows, dtype=et.numpy)).view(et.torch)
            tf.scatter(torch.arange(lo, hi), rows)
            if progress is not None:
                progress((hi - lo) * row_bytes)
    return tf.data_offset
