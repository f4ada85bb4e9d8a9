"""`gpuio import SRC DST`: convert a .npy, .pt or raw binary file into a gpuio TensorFile (block-aligned
.npy), streaming in chunks with a progress bar, so tables larger than memory convert too (.npy and raw
are memory-mapped; a .pt file is loaded whole, as torch.load requires). Every input is checked before
the first byte is written (see _check.py)."""
from __future__ import annotations

import os

import numpy as np
import typer

from . import _check

CHUNK_BYTES = 64 << 20  # bytes converted per step: bounds memory use


def _source(src: str, dtype: str | None, shape: str | None) -> np.ndarray:
    ext = os.path.splitext(src)[1].lower()
    if ext in (".npy", ".pt", ".pth"):
        for option, value in (("--dtype", dtype), ("--shape", shape)):
            if value is not None:
                _check.fail(option, value, f"only for raw sources; {src} is a {ext} file, which names its own")
        return _check.npy_source("SRC", src) if ext == ".npy" else _check.pt_source("SRC", src)
    if dtype is None:
        _check.fail("SRC", src, "is not .npy/.pt: give --dtype (and --shape) for raw data")
    dt = _check.dtype("--dtype", dtype)
    dims = _check.raw_shape("--shape", shape, os.path.getsize(src), dt, src)
    if not all(dims):
        _check.fail("SRC", src, "is empty: nothing to import")
    return np.memmap(src, dtype=dt, mode="r", shape=dims)


def import_(src: str = typer.Argument(..., help="source file: .npy, .pt, or raw"),
            dst: str = typer.Argument(..., help="TensorFile to create (.npy)"),
            dtype: str = typer.Option(None, help="element type of a raw source, e.g. float32"),
            shape: str = typer.Option(None, help="shape of a raw source, e.g. 1000000,128 (-1 once allowed); "
                                                 "must hold exactly the file's elements"),
            block_size: int = typer.Option(4096, help="block size of the TensorFile (a power of two >= 512)"),
            force: bool = typer.Option(False, "--force", help="replace DST if it exists")) -> None:
    _check.input_file("SRC", src)
    _check.power_of_two("--block-size", block_size, 512)
    _check.output_file("DST", dst, overwrite=force)
    if os.path.exists(dst) and os.path.samefile(src, dst):
        _check.fail("DST", dst, "is the source file")
    _check.need("torch", "gpuio import")
    arr = _source(src, dtype, shape)
    if arr.ndim == 0:
        _check.fail("SRC", src, "holds a scalar; a TensorFile needs at least one dimension")

    import torch
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from gpuio.tensor import TensorFile
    if force and os.path.exists(dst):
        os.unlink(dst)  # told to replace it
    arr2 = arr.reshape(arr.shape[0], -1) if arr.ndim > 1 else arr
    row_bytes = max(1, arr2[0:1].nbytes) if arr.shape[0] else 1
    step = max(1, CHUNK_BYTES // row_bytes)
    with TensorFile.create(dst, arr.shape, arr.dtype, block_size=block_size) as tf, Progress(
            TextColumn(f"{os.path.basename(src)} -> {os.path.basename(dst)}"), BarColumn(), DownloadColumn(),
            TransferSpeedColumn()) as bar:
        task = bar.add_task("import", total=arr.nbytes)
        for lo in range(0, arr.shape[0], step):
            hi = min(lo + step, arr.shape[0])
            tf.scatter(torch.arange(lo, hi), torch.from_numpy(np.array(arr[lo:hi])))
            bar.advance(task, (hi - lo) * row_bytes)
    typer.echo(f"{dst}: shape {tuple(arr.shape)}, dtype {arr.dtype}, data at byte {tf.data_offset}")
