"""TensorFiles stored on a volume instead of a file: the same .npy layout (header padded to a block
boundary, rows packed after it) written to the volume's first bytes, and the same `gpuio.TensorFile`
(gather/scatter/prefetch, TableCache on top) running on the rbd backend.

    tf = create_tensor("rbd/feat", (100_000, 128), "float32")     # makes the volume, writes the header
    tf.scatter(idx, rows); x = tf.gather(idx)
    tf = open_tensor("rbd/feat", "r", who=Identity(user="gpu1", keyring="gpu1.keyring"))
"""
from __future__ import annotations

import numpy as np

from gpuio._npy import MAGIC, parse_header

from . import api
from .api import Identity, _who

HEADER_BYTES = 4096  # TensorFile's DATA_ALIGN_BYTES: the header block(s) before the rows


def _engine_options(name: str, mode: str, who: Identity | None, lock_wait_s: float, break_lock: bool,
                    engine_options: dict) -> dict:
    rbd = _who(who).rbd_options(lock_wait_ms=int(lock_wait_s * 1000), break_lock=bool(break_lock))
    rbd.update(engine_options.pop("rbd", None) or {})
    return dict(engine_options, backend="rbd", writable=(mode == "r+"), rbd=rbd)


def create_tensor(name: str, shape, dtype="float32", block_size: int = api.DEFAULTS["block_size"],
                  who: Identity | None = None, object_size: int = api.DEFAULTS["object_size"], **engine_options):
    """A new zero-filled TensorFile on a new volume `name` sized for it; opened read-write (lock held)."""
    from gpuio._dtypes import element_type
    from gpuio.engine import check_option
    from gpuio.tensor import DATA_ALIGN_BYTES, TensorFile, file_bytes, npy_header

    check_option("block_size", block_size)
    shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
    dtype = element_type(dtype)
    offset = max(DATA_ALIGN_BYTES, block_size)
    v = api.create(name, file_bytes(shape, dtype, block_size), object_size=object_size, who=who)
    opts = _engine_options(v, "r+", who, 0, False, dict(engine_options))
    header = np.frombuffer(npy_header(dtype, shape, offset), np.uint8)
    tf = TensorFile.from_layout(v, shape, dtype, offset, block_size, True, opts)
    tf.target.write(np.arange(offset // block_size, dtype=np.int64), header.copy())
    return tf


def open_tensor(name: str, mode: str = "r", block_size: int = api.DEFAULTS["block_size"], who: Identity | None = None,
                lock_wait_s: float = 0, break_lock: bool = False, **engine_options):
    """Open the TensorFile on volume `name` ("r": read-only, no lock; "r+": takes the writer lock)."""
    from gpuio.engine import check_option
    from gpuio.tensor import DATA_ALIGN_BYTES, TensorFile

    if mode not in ("r", "r+"):
        raise ValueError(f"mode must be 'r' or 'r+', got {mode!r}")
    check_option("block_size", block_size)
    v = api.spec(name)
    with api.open(v, "r", who=who, block_size=block_size, workers=1) as eng:
        head = np.empty(max(HEADER_BYTES, block_size), np.uint8)
        eng.read(np.arange(len(head) // block_size, dtype=np.int64), head)
    if head[:len(MAGIC)].tobytes() != MAGIC:
        raise ValueError(f"volume {v} holds no TensorFile (no .npy header at byte 0)")
    shape, fortran, stored, offset, element = parse_header(head.tobytes(), f"volume {v}")
    dtype = element or stored  # the element type a bfloat16 table's header names, else NumPy's
    if fortran or offset % block_size or offset < DATA_ALIGN_BYTES:
        raise ValueError(f"volume {v}: header is not a TensorFile's (data at byte {offset}, fortran={fortran})")
    opts = _engine_options(v, mode, who, lock_wait_s, break_lock, dict(engine_options))
    return TensorFile.from_layout(v, shape, dtype, offset, block_size, mode == "r+", opts)

__all__ = ["HEADER_BYTES", "create_tensor", "open_tensor"]
