"""`gpuio import SRC DST`: convert a .npy, .pt or raw binary file into a gpuio TensorFile (block-aligned
.npy), streaming in chunks with a progress bar, so tables larger than memory convert too (.npy and raw
are memory-mapped; a .pt file is loaded whole, as torch.load requires)."""
from __future__ import annotations

import math
import os

import numpy as np
import typer

CHUNK_BYTES = 64 << 20  # bytes converted per step: bounds memory use


def _source(src: str, dtype: str | None, shape: str | None) -> np.ndarray:
    ext = os.path.splitext(src)[1].lower()
    if ext == ".npy":
        return np.load(src, mmap_mode="r")
    if ext in (".pt", ".pth"):
        import torch
        obj = torch.load(src, map_location="cpu", weights_only=True)
        if not isinstance(obj, torch.Tensor):
            raise typer.BadParameter(f"{src} holds a {type(obj).__name__}, not a tensor")
        if obj.dtype == torch.bfloat16:
            raise typer.BadParameter(f"{src}: bfloat16 has no NumPy dtype; convert to float32 first")
        return obj.contiguous().numpy()
    if dtype is None:
        raise typer.BadParameter(f"{src} is not .npy/.pt: give --dtype (and --shape) for raw data")
    dt = np.dtype(dtype)
    count = os.path.getsize(src) // dt.itemsize
    dims = tuple(int(s) for s in shape.split(",")) if shape else (count,)
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        dims = tuple(count // known if d == -1 else d for d in dims)
    if math.prod(dims) * dt.itemsize > os.path.getsize(src):
        raise typer.BadParameter(f"shape {dims} of {dt} needs {math.prod(dims) * dt.itemsize} bytes, "
                                 f"{src} has {os.path.getsize(src)}")
    return np.memmap(src, dtype=dt, mode="r", shape=dims)


def import_(src: str = typer.Argument(..., help="source file: .npy, .pt, or raw"),
            dst: str = typer.Argument(..., help="TensorFile to create (.npy)"),
            dtype: str = typer.Option(None, help="element type of a raw source, e.g. float32"),
            shape: str = typer.Option(None, help="shape of a raw source, e.g. 1000000,128 (-1 once allowed)"),
            block_size: int = typer.Option(4096, help="block size of the TensorFile")) -> None:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
    from gpuio.tensor import TensorFile
    import torch
    if not os.path.exists(src):
        raise typer.BadParameter(f"no such file: {src}")
    arr = _source(src, dtype, shape)
    if arr.ndim == 0:
        raise typer.BadParameter(f"{src} holds a scalar; a TensorFile needs at least one dimension")
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
