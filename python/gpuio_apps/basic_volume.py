""""Basic": GNStor's CPU-centric volume client — one synchronous librbd call per request (rbd_read /
rbd_write), no queue, no engine. The baseline the applications (gpuio_apps.papers, a volume as --store) and
benchmarks/volumes_bench.py compare gpuio's rbd backend against (an application module: the library has no use for it). librados/librbd through ctypes, the same
libraries the rbd backend links (python3-rados is not needed).

    v = SyncVolume("rbd:rbd/x", writable=True, who=Identity(conf=C))
    v.read(offset, memoryview_of_buffer); v.write(offset, mv); v.flush(); v.close()
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

from gpuio.volumes import Identity, parts

_libs: tuple | None = None


def _load():
    global _libs
    if _libs is None:
        rados = ctypes.CDLL(ctypes.util.find_library("rados") or "librados.so.2")
        rbd = ctypes.CDLL(ctypes.util.find_library("rbd") or "librbd.so.1")
        for f in (rbd.rbd_read, rbd.rbd_write):
            f.restype = ctypes.c_ssize_t
            f.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
        _libs = (rados, rbd)
    return _libs


class SyncVolume:
    """A volume opened through librbd's synchronous calls (read-only unless writable; a writer takes the
    image's exclusive lock implicitly on its first write, as librbd does for any client)."""

    def __init__(self, name: str, writable: bool = False, who: Identity | None = None):
        who = Identity() if who is None else who
        if not isinstance(who, Identity):
            raise TypeError(f"who must be a gpuio.volumes.Identity, got {type(who).__name__}")
        self.rados, self.rbd = _load()
        pool, ns, image = parts(name)
        self.name = f"rbd:{pool}/{ns + '/' if ns else ''}{image}"
        self.cluster, self.io, self.image = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        user = (who.user or "admin").removeprefix("client.")
        self._ok(self.rados.rados_create(ctypes.byref(self.cluster), user.encode()), "rados_create")
        try:
            conf = who.conf or os.environ.get("CEPH_CONF", "")
            self._ok(self.rados.rados_conf_read_file(self.cluster, conf.encode() if conf else None), "conf")
            if who.keyring:
                self.rados.rados_conf_set(self.cluster, b"keyring", who.keyring.encode())
            self.rados.rados_conf_set(self.cluster, b"rbd_cache", b"false")  # acknowledged = on the OSDs
            self._ok(self.rados.rados_connect(self.cluster), "connect")
            self._ok(self.rados.rados_ioctx_create(self.cluster, pool.encode(), ctypes.byref(self.io)), "pool")
            self.rados.rados_ioctx_set_namespace(self.io, ns.encode())
            opener = self.rbd.rbd_open if writable else self.rbd.rbd_open_read_only
            self._ok(opener(self.io, image.encode(), ctypes.byref(self.image), None), "open")
        except BaseException:
            self.close()
            raise
        size = ctypes.c_uint64()
        self.rbd.rbd_get_size(self.image, ctypes.byref(size))
        self.size = size.value

    def _ok(self, rc: int, what: str) -> None:
        if rc < 0:
            cls = PermissionError if -rc in (1, 13) else OSError
            raise cls(-rc, f"volume '{getattr(self, 'name', '?')}': librbd {what} failed: {os.strerror(-rc)}")

    def _io(self, fn, what: str, offset: int, buf: memoryview) -> int:
        """One synchronous librbd call (rbd_read / rbd_write) on buf; its byte count, or the error raised."""
        n = len(buf)
        rc = fn(self.image, offset, n, ctypes.addressof(ctypes.c_char.from_buffer(buf)))
        if rc < 0:
            self._ok(rc, f"{what} of {n} bytes at {offset}")
        return rc

    def read(self, offset: int, buf: memoryview) -> int:
        return self._io(self.rbd.rbd_read, "read", offset, buf)

    def write(self, offset: int, buf: memoryview) -> int:
        return self._io(self.rbd.rbd_write, "write", offset, buf)

    def flush(self) -> None:
        if self.image:
            self._ok(self.rbd.rbd_flush(self.image), "flush")

    def close(self) -> None:
        if self.image:
            self.rbd.rbd_close(self.image)
            self.image = ctypes.c_void_p()
        if self.io:
            self.rados.rados_ioctx_destroy(self.io)
            self.io = ctypes.c_void_p()
        if self.cluster:
            self.rados.rados_shutdown(self.cluster)
            self.cluster = ctypes.c_void_p()

__all__ = ["SyncVolume"]
