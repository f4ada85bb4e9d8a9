"""The benchmark's data file: real data written to the device (never sparse or fallocated, since holes
read back without device I/O), reused when an earlier run left a complete one.

Its first MARKER_BYTES say that gpuio wrote it (is_ours). No pass of the bench touches them, the write passes
included (measure: the engine's block source and the raw reference's skip_bytes), so a later run still knows the
file whatever the passes wrote over the rest."""
from __future__ import annotations

import os

import numpy as np

from gpuio import outputs

CHUNK_BYTES = 8 << 20
MARKER_BYTES = 4096  # the first block: create()'s pattern for the seed, which no bench pass writes over


def is_complete(path: str, nbytes: int) -> bool:
    """True when path holds nbytes and every byte has storage allocated (no holes)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    return st.st_size == nbytes and st.st_blocks * 512 >= nbytes


def _first_block(seed: int) -> bytes:
    """What create() writes into the first 4 KiB: block number 0, then the seed's first random bytes."""
    return bytes(8) + np.random.default_rng(seed).bytes(MARKER_BYTES)[8:]


def is_ours(path: str, seed: int = 1) -> bool:
    """True when path is a data file this module wrote: its first 4 KiB are create()'s pattern for `seed`
    (block number 0 and seeded random bytes, a 4 KiB marker no other file holds by chance)."""
    try:
        with open(path, "rb") as f:
            return f.read(MARKER_BYTES) == _first_block(seed)
    except OSError:
        return False


def create(path: str, nbytes: int, progress=None, seed: int = 1, overwrite: bool = False) -> bool:
    """Write nbytes of data to path unless it already holds a complete data file of ours. Returns True when
    it wrote.

    Each 4 KiB block starts with its own block number, the rest is seeded random bytes, so no block
    is all zeros and no two blocks are equal. progress(done_bytes, total_bytes) is called per chunk.
    An existing file is replaced only when it is ours (is_ours) or with overwrite=True, never when it is not
    a regular file; free space is checked first, and the data goes to a temporary name that is renamed
    when complete (gpuio.outputs), so a failure leaves no partial file.
    """
    if nbytes <= 0 or nbytes % 4096:
        raise ValueError(f"size must be a positive multiple of 4096 bytes, got {nbytes}")
    dest = outputs.destination(path, overwrite=overwrite, ours=lambda p: is_ours(p, seed))
    if is_ours(dest, seed) and is_complete(dest, nbytes):
        return False
    old = os.path.getsize(dest) if os.path.exists(dest) and is_ours(dest, seed) else 0
    outputs.check_space(dest, nbytes, reclaim_bytes=old)
    if old:
        os.unlink(dest)  # ours, of another size: its room goes to the new one
    chunk = np.frombuffer(np.random.default_rng(seed).bytes(CHUNK_BYTES), dtype=np.uint8).copy()
    stamp = chunk.view(np.uint64).reshape(-1, 512)  # one row per 4 KiB block
    with outputs.atomic_output(dest, overwrite=overwrite, ours=lambda p: is_ours(p, seed)) as tmp:
        fd = os.open(tmp, os.O_WRONLY)
        try:
            done = 0
            while done < nbytes:
                n = min(CHUNK_BYTES, nbytes - done)
                first = done // 4096
                stamp[:, 0] = np.arange(first, first + CHUNK_BYTES // 4096, dtype=np.uint64)
                view = memoryview(chunk)[:n]
                while view:
                    view = view[os.write(fd, view):]
                done += n
                if progress:
                    progress(done, nbytes)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # start with the data on the device only
        finally:
            os.close(fd)
    return True


def parse_size(text: str) -> int:
    """'8G', '512M', '64MiB', '1048576' -> bytes (binary units)."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    try:
        if t and t[-1] in mult:
            return int(float(t[:-1]) * mult[t[-1]])
        return int(t)
    except ValueError:
        raise ValueError(f"cannot parse size {text!r} (examples: 512M, 8G)") from None
