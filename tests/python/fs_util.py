"""Real file-system situations for the safe-output tests: a small tmpfs that fills up (ENOSPC for real), the
kinds of non-regular file gpuio must never write over, and a file-size limit (EFBIG for real, no root)."""
from __future__ import annotations

import contextlib
import os
import resource
import signal
import socket
import stat
import subprocess
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(where: Path, size_bytes: int):
    """A tmpfs of size_bytes mounted at `where` (created), unmounted after; skips where mounting needs
    privileges this process lacks."""
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(folder: Path, name: str = "filler") -> Path:
    """Writes into folder/name until its file system is full (ENOSPC); returns that file."""
    p = folder / name
    chunk = b"\xff" * (1 << 16)
    with open(p, "ab", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as e:
            assert e.errno == 28, e
    with contextlib.suppress(OSError), open(p, "ab", buffering=0) as f:  # the last partial page too
        while f.write(b"\xff"):
            pass
    return p


def non_regular(kind: str, folder: Path) -> Path:
    """A non-regular file of `kind` in folder: fifo, directory, socket, chardev (a null device node: skips
    without the privilege to make one), symlink-dev / symlink-dir (symlinks to the chardev / a directory)."""
    p = folder / kind
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "directory":
        p.mkdir()
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(p))
        s.close()
    elif kind == "chardev":
        try:
            os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("making a device node needs root")
    elif kind == "symlink-dev":
        os.symlink(non_regular("chardev", folder), p)
    elif kind == "symlink-dir":
        os.symlink(non_regular("directory", folder), p)
    else:
        raise ValueError(kind)
    return p


KINDS = ("fifo", "directory", "socket", "chardev", "symlink-dev", "symlink-dir")


def kind_of(p: Path) -> int:
    """stat.S_IFMT of what p names (the link itself for a symlink)."""
    return stat.S_IFMT(os.lstat(p).st_mode)


def file_size_limit(limit_bytes: int):
    """A preexec_fn for subprocess: writes past limit_bytes fail with EFBIG (SIGXFSZ ignored)."""
    def setup():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return setup


def listing(folder: Path) -> list[str]:
    """Every name under folder, hidden ones (temporary files) included."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
