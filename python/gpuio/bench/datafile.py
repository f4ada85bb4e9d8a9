"""The benchmark's data file: real data written to the device (never sparse or fallocated, since holes
read back without device I/O), reused when an earlier run left a complete one."""
from __future__ import annotations

import os

import numpy as np

CHUNK_BYTES = 8 << 20


def is_complete(path: str, nbytes: int) -> bool:
    """True when path holds nbytes and every byte has storage allocated (no holes)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    return st.st_size == nbytes and st.st_blocks * 512 >= nbytes


def create(path: str, nbytes: int, progress=None, seed: int = 1) -> bool:
    """Write nbytes of data to path unless it is already complete. Returns True when it wrote.

    Each 4 KiB block starts with its own block number, the rest is seeded random bytes, so no block
    is all zeros and no two blocks are equal. progress(done_bytes, total_bytes) is called per chunk.
    """
    if nbytes <= 0 or nbytes % 4096:
        raise ValueError(f"size must be a positive multiple of 4096 bytes, got {nbytes}")
    if is_complete(path, nbytes):
        return False
    chunk = np.frombuffer(np.random.default_rng(seed).bytes(CHUNK_BYTES), dtype=np.uint8).copy()
    stamp = chunk.view(np.uint64).reshape(-1, 512)  # one row per 4 KiB block
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
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
