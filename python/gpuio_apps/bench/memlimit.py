"""Out-of-core means out of memory: run part of a process with its memory (page cache included) bounded
by a cgroup of its own, so an mmap baseline cannot quietly read a file from RAM (BENCHMARKS.md).

    lim = MemoryLimit.enter("gpuio-demo")      # None (with MemoryLimit.why) where no cgroup can be made
    ...warm up...                              # anon memory the run needs gets charged here
    lim.set(lim.anon_bytes() + budget)         # from now on the page cache holds at most ~budget
    ...measure...
    lim.leave()                                # back to the original cgroup; the group is removed

Handles cgroup v2 (the GPU machine: /sys/fs/cgroup/memory.max) and v1 (the 2-core development and CI
machines: /sys/fs/cgroup/memory/<name>/memory.limit_in_bytes). Memory charged before `enter` stays with
the old group (neither version moves charges by default), so the limit bounds what is read afterwards.
Needs root (or a delegated cgroup); without it `enter` returns None and `why` says what failed.
"""
from __future__ import annotations

import contextlib
import os
import subprocess

V2_ROOT = "/sys/fs/cgroup"
V1_ROOT = "/sys/fs/cgroup/memory"
V1_UNLIMITED = 1 << 62  # v1 shows "no limit" as a page-rounded LONG_MAX


def _read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def drop_file_cache(path: str | None = None) -> str:
    """Evict cached pages: the whole page cache where allowed (root), else `path`'s pages (posix_fadvise
    DONTNEED works for any user on a file it can open). Returns what was done, for the report."""
    try:
        subprocess.run(["sync"], check=True)
        _write("/proc/sys/vm/drop_caches", "3")
        return "page cache dropped"
    except (OSError, subprocess.CalledProcessError):
        pass
    if path is None:
        return "page cache not dropped (not root)"
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)  # dirty pages are not dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return f"{os.path.basename(path)} evicted from the page cache (posix_fadvise)"


class MemoryLimit:
    why = ""  # why the last enter() returned None

    def __init__(self, version: int, path: str, home: str):
        self.version, self.path, self.home = version, path, home
        self._peak_fd = None  # v2: memory.peak reset through this descriptor (reset_peak) and read through it

    # -- construction -------------------------------------------------------------------------------------
    @classmethod
    def enter(cls, name: str) -> "MemoryLimit | None":
        """Move this process into a fresh memory cgroup with no limit yet; None where that is impossible."""
        name = f"{name}-{os.getpid()}"
        try:
            if os.path.exists(os.path.join(V2_ROOT, "cgroup.controllers")):
                if "memory" not in _read(os.path.join(V2_ROOT, "cgroup.controllers")).split():
                    raise OSError("the cgroup v2 hierarchy has no memory controller")
                home = cls._v2_home()
                if "memory" not in _read(os.path.join(V2_ROOT, "cgroup.subtree_control")).split():
                    _write(os.path.join(V2_ROOT, "cgroup.subtree_control"), "+memory")
                path = os.path.join(V2_ROOT, name)
                os.makedirs(path, exist_ok=True)
                lim = cls(2, path, home)
            elif os.path.isdir(V1_ROOT):
                home = cls._v1_home()
                path = os.path.join(V1_ROOT, name)
                os.makedirs(path, exist_ok=True)
                lim = cls(1, path, home)
            else:
                raise OSError("no cgroup memory controller is mounted")
            _write(os.path.join(lim.path, "cgroup.procs"), str(os.getpid()))
            return lim
        except OSError as e:
            cls.why = f"no memory cgroup ({e.strerror or e})"
            return None

    @classmethod
    def current(cls) -> "MemoryLimit | None":
        """The memory cgroup this process is in now (v2 or v1), to read its figures and limit; None where no
        memory controller is mounted or the process is in none. Not for `set`/`leave`: it is not ours."""
        try:
            if os.path.exists(os.path.join(V2_ROOT, "cgroup.controllers")):
                version, home = 2, cls._v2_home()
            elif os.path.isdir(V1_ROOT):
                version, home = 1, cls._v1_home()
            else:
                return None
        except OSError:
            return None
        return cls(version, home, home) if os.path.exists(os.path.join(home, "memory.stat")) else None

    @staticmethod
    def _v2_home() -> str:
        for line in _read("/proc/self/cgroup").splitlines():
            if line.startswith("0::"):
                return V2_ROOT + line.split("::", 1)[1]
        raise OSError("this process is in no cgroup v2 group")

    @staticmethod
    def _v1_home() -> str:
        for line in _read("/proc/self/cgroup").splitlines():
            parts = line.split(":", 2)
            if len(parts) == 3 and "memory" in parts[1].split(","):
                return V1_ROOT + parts[2]
        raise OSError("this process is in no cgroup v1 memory group")

    # -- figures ----------------------------------------------------------------------------------------------
    def _stat(self) -> dict:
        with open(os.path.join(self.path, "memory.stat")) as f:
            return {k: int(v) for k, v in (line.split() for line in f)}

    def anon_bytes(self) -> int:
        """Anonymous memory charged to the group (what the run itself allocated since enter)."""
        s = self._stat()  # v1's "rss" was seen at 60 KiB while its LRU lists held 458 MiB of anonymous pages
        return s["anon"] if self.version == 2 else s.get("inactive_anon", 0) + s.get("active_anon", 0)

    def cache_bytes(self) -> int:
        s = self._stat()
        return s["file"] if self.version == 2 else s.get("cache", 0)

    def usage_bytes(self) -> int:
        """Memory charged to the group now (anonymous memory and page cache)."""
        return int(_read(os.path.join(self.path, "memory.current" if self.version == 2 else "memory.usage_in_bytes")))

    def peak_bytes(self) -> int | None:
        """The group's peak usage since it was made, or since reset_peak."""
        if self._peak_fd is not None:
            return int(os.pread(self._peak_fd, 64, 0))
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int(_read(os.path.join(self.path, name)))
        except (OSError, ValueError):
            return None

    def limit_bytes(self) -> int | None:
        name = "memory.max" if self.version == 2 else "memory.limit_in_bytes"
        v = _read(os.path.join(self.path, name))
        return None if v == "max" or int(v) >= V1_UNLIMITED else int(v)

    def effective_limit_bytes(self) -> int | None:
        """The smallest limit on this group and the groups above it (what bounds the process); None: none."""
        if self.version == 1:
            v = self._stat().get("hierarchical_memory_limit", V1_UNLIMITED)
            return None if v >= V1_UNLIMITED else v
        limits, path = [], self.path
        while len(path) > len(V2_ROOT) and path.startswith(V2_ROOT + "/"):
            try:
                v = _read(os.path.join(path, "memory.max"))
            except OSError:
                v = "max"
            if v != "max":
                limits.append(int(v))
            path = os.path.dirname(path)
        return min(limits) if limits else None

    # -- control ----------------------------------------------------------------------------------------------
    def set(self, nbytes: int) -> None:
        """Bound the group's memory (anon + page cache) to nbytes."""
        name = "memory.max" if self.version == 2 else "memory.limit_in_bytes"
        _write(os.path.join(self.path, name), str(int(nbytes)))

    def unset(self) -> None:
        """No limit (the group still counts)."""
        _write(os.path.join(self.path, "memory.max" if self.version == 2 else "memory.limit_in_bytes"),
               "max" if self.version == 2 else "-1")

    def reset_peak(self) -> None:
        """From now on peak_bytes() is the peak since this call. v2 (kernel >= 6.12) resets memory.peak for the
        descriptor it was written through, which is kept and read from; OSError where the kernel cannot."""
        if self.version == 1:
            _write(os.path.join(self.path, "memory.max_usage_in_bytes"), "0")
            return
        fd = self._peak_fd if self._peak_fd is not None else os.open(os.path.join(self.path, "memory.peak"), os.O_RDWR)
        try:
            os.write(fd, b"reset\n")
        except OSError:
            if fd != self._peak_fd:
                os.close(fd)
            raise
        self._peak_fd = fd

    @contextlib.contextmanager
    def outside(self):
        """This process back in its home group for the block, then in this group again: processes it starts
        meanwhile (workers that hold none of the data the limit is for) are not charged here."""
        _write(os.path.join(self.home, "cgroup.procs"), str(os.getpid()))
        try:
            yield
        finally:
            _write(os.path.join(self.path, "cgroup.procs"), str(os.getpid()))

    def describe(self) -> str:
        lim = self.limit_bytes()
        return (f"cgroup v{self.version} memory limit "
                f"{'none' if lim is None else f'{lim / 2**20:.0f} MiB'}")

    def leave(self) -> None:
        """Back to the group this process came from, with every process still in the group (children it
        started there: a multiprocessing forkserver, say); the group is removed (its leftover page-cache
        charges go with it)."""
        if self._peak_fd is not None:
            os.close(self._peak_fd)
            self._peak_fd = None
        try:
            _write(os.path.join(self.home, "cgroup.procs"), str(os.getpid()))
        except OSError:
            return
        try:
            left = _read(os.path.join(self.path, "cgroup.procs")).split()
        except OSError:
            left = []
        for pid in left:
            try:
                _write(os.path.join(self.home, "cgroup.procs"), pid)
            except OSError:  # it ended meanwhile
                pass
        try:
            os.rmdir(self.path)
        except OSError:
            pass


__all__ = ["MemoryLimit", "drop_file_cache"]
