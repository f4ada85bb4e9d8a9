"""Safe output files: how gpuio writes a file whose name a user gave (a TensorFile, `gpuio import`'s destination,
the benchmark's data file, JSON, plots, keyrings).

- Never over a non-regular file (device, fifo, socket, directory, or a symlink to one), whatever
  `overwrite` says. A symlink to a regular file is followed: the file it names is replaced, the link stays.
- An existing regular file is replaced only with overwrite=True, or when `ours(path)` recognises it as a
  file gpuio wrote and can write again (the benchmark's data file). An empty file holds nothing to lose.
- Free space is checked before any byte is written when the size is known (ENOSPC naming the bytes needed
  and available).
- The bytes go to a hidden temporary name in the destination's folder (`.NAME.gpuio-XXXXXXXX.EXT`), are
  fsynced, and are renamed over the destination only when complete; a failure (ENOSPC, Ctrl-C, an
  exception) removes the temporary file, so it leaves nothing behind and the old file, if any, intact.

    with atomic_output("out.json", overwrite=force) as tmp:
        with open(tmp, "w") as f:
            json.dump(doc, f)
"""
from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from typing import Callable, Iterator, Optional

__all__ = ["TEMP_TAG", "OutputRefused", "atomic_output", "check_space", "destination", "free_bytes", "fsync_path",
           "reserve_space", "write_text"]

TEMP_TAG = ".gpuio-"  # in every temporary name: `.NAME.gpuio-XXXXXXXX.EXT`

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a fifo"), (stat.S_ISSOCK, "a socket"))


class OutputRefused(FileExistsError):
    """gpuio will not write at this path. `reason` says why in a few words; `forceable` is True when
    overwrite=True (the CLI's --force) would allow it, False for a non-regular file."""

    def __init__(self, path: str, reason: str, forceable: bool):
        hint = "; gpuio will not replace it without overwrite=True" if forceable else "; gpuio never writes over one"
        super().__init__(errno.EEXIST, f"{reason}{hint}", path)
        self.reason, self.forceable = reason, forceable


def _kind(mode: int) -> str | None:
    """None for a regular file, else what it is ('a character device', ...)."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def destination(path, *, overwrite: bool = False, ours: Optional[Callable[[str], bool]] = None) -> str:
    """The file that writing `path` would replace (a symlink followed), after the checks above: raises
    OutputRefused for a non-regular file or an existing one that may not be replaced, FileNotFoundError
    when the folder does not exist."""
    path = os.fspath(path)
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    if st is not None:
        kind = _kind(st.st_mode)
        if kind is not None:
            via = f" (through the symlink {path})" if real != os.path.abspath(path) else ""
            raise OutputRefused(path, f"is {kind}, not a regular file{via}", False)
        if st.st_size and not overwrite and not (ours is not None and ours(real)):
            raise OutputRefused(path, f"exists ({st.st_size} bytes{'' if ours is None else ', not written by gpuio'})",
                                True)
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        raise FileNotFoundError(errno.ENOENT, f"folder {folder} does not exist", path)
    return real


def free_bytes(path) -> int:
    """Bytes an unprivileged writer may still use on the file system that holds `path` (a file or folder;
    a missing file counts as its folder)."""
    p = os.path.realpath(os.fspath(path))
    if not os.path.isdir(p):
        p = os.path.dirname(p)
    s = os.statvfs(p)
    return s.f_bavail * s.f_frsize


def check_space(path, need_bytes: int, reclaim_bytes: int = 0) -> None:
    """ENOSPC naming both numbers when the file system of `path` cannot take `need_bytes` more
    (`reclaim_bytes`: what the write frees first, e.g. an old file of ours it deletes)."""
    have = free_bytes(path) + reclaim_bytes
    if need_bytes > have:
        raise OSError(errno.ENOSPC, f"needs {need_bytes} bytes ({_gib(need_bytes)}) and its file system has "
                                    f"{have} available ({_gib(have)})", os.fspath(path))


def _gib(n: int) -> str:
    return f"{n / (1 << 30):,.1f} GiB"


def _temp_name(dest: str) -> str:
    folder, base = os.path.split(dest)
    stem, ext = os.path.splitext(base)
    return os.path.join(folder, f".{stem}{TEMP_TAG}{secrets.token_hex(4)}{ext}")


def fsync_path(path: str | os.PathLike, directory: bool = False, data_only: bool = False) -> None:
    """fsync the file (or, directory=True, the folder: a rename's durability) at `path`, opened read-only and
    closed again; data_only: fdatasync (the data and the length, not the other metadata). The one helper of
    the kind: gpuio's writers and the applications' timed saves call it."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        (os.fdatasync if data_only else os.fsync)(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_output(path, *, overwrite: bool = False, ours: Optional[Callable[[str], bool]] = None,
                  need_bytes: int = 0, mode: int = 0o666) -> Iterator[str]:
    """Yields a new, empty temporary file's path in the destination's folder; when the block ends without
    an exception, fsyncs it and renames it over the destination (see the module's rules). A new file gets
    `mode` less the umask, as open() gives it; a replaced file's permission bits are kept (within `mode`).
    On any exception, KeyboardInterrupt included, the temporary file is removed."""
    dest = destination(path, overwrite=overwrite, ours=ours)
    if need_bytes:
        check_space(dest, need_bytes)
    try:
        keep = stat.S_IMODE(os.stat(dest).st_mode) & mode
    except FileNotFoundError:
        keep = None
    while True:
        tmp = _temp_name(dest)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
            break
        except FileExistsError:
            continue
    try:
        try:
            if keep is not None:
                os.fchmod(fd, keep)
        finally:
            os.close(fd)
        yield tmp
        fsync_path(tmp)
        destination(path, overwrite=overwrite, ours=ours)  # still a place we may write (it may have changed)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename's durability; some file systems refuse a folder fsync
        fsync_path(os.path.dirname(dest), directory=True)


def write_text(path, text: str, *, overwrite: bool = False, ours: Optional[Callable[[str], bool]] = None,
               mode: int = 0o666) -> None:
    """`text` into `path` through atomic_output (JSON, reports, keyrings)."""
    with atomic_output(path, overwrite=overwrite, ours=ours, mode=mode) as tmp:
        with open(tmp, "w") as f:
            f.write(text)


def reserve_space(fd: int, offset: int, length: int) -> bool:
    """Reserve [offset, offset + length) of the open file fd on its file system (fallocate mode 0: unwritten
    extents, the file grown if shorter, blocks it has kept). An O_DIRECT write into a reserved block is an
    overwrite (ext4's shared inode lock) rather than an allocation. False where the file system cannot (no
    emulation that would write every block); OSError for any other failure."""
    from gpuio import _core

    return bool(_core.reserve_space(fd, offset, length))
