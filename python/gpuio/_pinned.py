"""Page-locked host memory of gpuio's own: one way to make it (`page_locked`) and a per-process pool of staging
slots made that way (`take_slot` / `give_slot`).

Why not torch's pin_memory=True: its blocks are 4 KiB pages, rounded up to a power of two. An O_DIRECT request
into 4 KiB pages is one segment per page (a 1 MiB read: 256, more than virtio-blk takes, 254, so the block layer
splits it) and the guest and the hypervisor map every page: on the 2-core development VM, 8 threads reading a
4 GiB file in 16 MiB engine reads ran 1.4-1.7 GB/s into 4 KiB pages and 3.4-3.8 GB/s into 2 MiB pages, the
same requests. Here the memory is a private anonymous mapping (a shared one would be shmem, which transparent
huge pages leave alone) advised MADV_HUGEPAGE, used from a 2 MiB boundary, touched so the kernel faults it in
2 MiB pages where it can, and registered with CUDA (cudaHostRegister, portable and mapped) until the last view of
it is gone.

The pool keeps slots registered from one use to the next (registration pins and maps every page: a cost per
slot, not per read), per process: a forked child's copies were never registered, so a child starts its own.
"""
from __future__ import annotations

import mmap
import os
import threading
import weakref

import numpy as np

from ._forked import ForkAware
from .gpu import in_bad_fork

HUGE_PAGE = 2 << 20
_REGISTER_FLAGS = 3  # cudaHostRegisterPortable | cudaHostRegisterMapped (gpu.mapped_view works on the memory)


def page_locked(nbytes: int):
    """A uint8 torch tensor of nbytes in page-locked host memory (2 MiB pages where the kernel gives them), or
    None where it cannot be had: no CUDA, a forked child of a CUDA process, nbytes 0, or CUDA refusing the
    registration (RLIMIT_MEMLOCK, say). The caller falls back to what suits it."""
    import torch

    if nbytes <= 0 or not torch.cuda.is_available() or in_bad_fork():
        return None
    mapping = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        mapping.madvise(mmap.MADV_HUGEPAGE)
    whole = np.frombuffer(mapping, dtype=np.uint8)
    skip = (-whole.ctypes.data) % HUGE_PAGE
    array = whole[skip:skip + nbytes]
    array[::4096] = 0  # fault every page in (2 MiB ones where possible) before CUDA pins them
    cudart = torch.cuda.cudart()
    try:
        ok = int(cudart.cudaHostRegister(array.ctypes.data, nbytes, _REGISTER_FLAGS)) == 0
    except (RuntimeError, AttributeError):
        ok = False
    if not ok:
        return None
    # `whole` outlives every view (their base); NumPy clears its weak references before it lets go of the
    # mapping, so the pages are unregistered while still mapped.
    weakref.finalize(whole, _unregister, cudart, array.ctypes.data, os.getpid())
    return torch.from_numpy(array)


def _unregister(cudart, address: int, pid: int) -> None:
    """cudaHostUnregister, in the process that registered the pages (a forked child's copy never was)."""
    if os.getpid() == pid:
        cudart.cudaHostUnregister(address)


class _Pool(ForkAware):
    def __init__(self):
        self._opened_here()
        self._after_fork()

    def _after_fork(self) -> None:
        """A forked child's copies of the parent's slots were never registered here: the child starts empty."""
        self.lock = threading.Lock()
        self.free: dict[int, list] = {}  # nbytes -> slots not in use
        self.made = 0  # bytes of slots made, in use or not


_pool = _Pool()


def _this_process_pool() -> _Pool:
    _pool._this_process()
    return _pool


def take_slot(nbytes: int):
    """A page-locked slot of nbytes from the pool (made with page_locked when none is free), or None where
    page_locked gives none. Hand it back with give_slot once nothing reads or writes it any more."""
    pool = _this_process_pool()
    with pool.lock:
        free = pool.free.get(nbytes)
        if free:
            return free.pop()
    slot = page_locked(nbytes)
    if slot is not None:
        with pool.lock:
            pool.made += nbytes
    return slot


def give_slot(slot) -> None:
    """Return a slot take_slot gave (in this process) for the next take_slot of its size."""
    pool = _this_process_pool()
    with pool.lock:
        pool.free.setdefault(slot.numel(), []).append(slot)


def pool_stats() -> dict:
    """bytes of slots this process's pool made, and of those not in use now."""
    pool = _this_process_pool()
    with pool.lock:
        return {"made_bytes": pool.made, "free_bytes": sum(k * len(v) for k, v in pool.free.items())}


def page_locked_stats() -> dict:
    """The page-locked staging of gpuio.safetensors in this process: plan_reader, the GPU layer's one pinned pool
    (the C++ plan reader's rings, gpuio/plan_reader.hpp: made_bytes, registered_bytes with CUDA, free_bytes), and
    page_locked_bytes, this pool's slots (all registered) and the plan reader's registered bytes together."""
    from . import _core

    plan = dict(_core.pinned_pool_stats())
    return {"plan_reader": plan, "page_locked_bytes": pool_stats()["made_bytes"] + plan["registered_bytes"]}


def release_slots() -> int:
    """Let go of the pool's free slots (their pages are unregistered and unmapped once nothing else holds them)
    and of the plan reader pool's free blocks; returns the bytes let go."""
    pool = _this_process_pool()
    with pool.lock:
        freed = sum(k * len(v) for k, v in pool.free.items())
        pool.free.clear()
        pool.made -= freed
    from . import _core

    return freed + int(_core.pinned_pool_release())  # and the plan reader pool's free blocks


def huge_page_bytes() -> int:
    """Bytes of this process's free pool slots (those not in use now) that lie in 2 MiB pages (AnonHugePages of
    /proc/self/smaps over the mappings holding them): whether the kernel gave what MADV_HUGEPAGE asked for. 0 where
    smaps is not there.
    Reads all of smaps: for benchmarks and tests, not for a load's path."""
    pool = _this_process_pool()
    with pool.lock:
        starts = sorted(int(s.data_ptr()) for v in pool.free.values() for s in v)
    if not starts:
        return 0
    total, inside = 0, False
    try:
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split(None, 1)[0]
                if "-" in head and not head.endswith(":"):
                    lo, hi = (int(x, 16) for x in head.split("-"))
                    inside = any(lo <= a < hi for a in starts)
                elif inside and head == "AnonHugePages:":
                    total += int(line.split()[1]) << 10
    except OSError:
        return 0
    return total
