"""The stream store's device files before it opens them: which exist, and (modes "c"/"w") creating missing ones."""
from __future__ import annotations

import errno
import os

from ..engine import Engine


def holds_data(path: str) -> bool:
    """True for an existing device or non-empty file; an empty regular file counts as missing."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    return not (os.path.isfile(path) and st.st_size == 0)


def names(paths: list) -> str:
    """The paths as messages name them."""
    return paths[0] if len(paths) == 1 else str(paths)


def prepare(paths: list, mode: str, create_bytes: int, sblock_bytes: int) -> tuple[bool, list]:
    """(fresh: the store must be formatted, paths this call created). FileNotFoundError for a missing store that
    mode may not create, or for some of several devices missing."""
    exists = [holds_data(p) for p in paths]
    if any(exists) and not all(exists):
        missing = [p for p, e in zip(paths, exists) if not e]
        raise FileNotFoundError(errno.ENOENT, f"stream store device(s) {missing} missing while others exist")
    if any(exists):
        return mode == "w", []
    if mode in ("r", "r+"):
        raise FileNotFoundError(errno.ENOENT, f"no stream store at {names(paths)}; pass mode='c' to "
                                f"create one (create_bytes={create_bytes}, sparse)")
    if not isinstance(create_bytes, int) or create_bytes < sblock_bytes * len(paths):
        raise ValueError(f"create_bytes {create_bytes!r} must be an int >= one sblock per device "
                         f"({sblock_bytes * len(paths)})")
    per = -(-create_bytes // len(paths) // sblock_bytes) * sblock_bytes
    created = []
    try:
        for p in paths:
            if not os.path.exists(p):
                created.append(p)  # removed again if this call fails
            Engine.create_file(p, per)
    except BaseException:
        remove(created)
        raise
    return True, created


def remove(paths: list) -> None:
    """Remove files this call created (a store that could not be made is not left behind)."""
    for p in paths:
        try:
            os.unlink(p)
        except OSError:
            pass

__all__ = ["holds_data", "names", "prepare", "remove"]
