"""Page-locked host memory for gpuio's Python layers, from the process's one pinned pool: the C++ pool
(gpuio/pinned_pool.hpp, `_core.pinned_take`) that the plan reader's rings, the engine's staging, the stream path's
bounce pool and device arrays' staging come from too. One way to make a buffer that lives as long as its views
(`page_locked`), and staging slots kept from one load to the next (`take_slot` / `give_slot`).

Why not torch's pin_memory=True: its blocks are 4 KiB pages, rounded up to a power of two. An O_DIRECT request
into 4 KiB pages is one segment per page (a 1 MiB read: 256, more than virtio-blk takes, 254, so the block layer
splits it) and the guest and the hypervisor map every page: on the 2-core development VM, 8 threads reading a
4 GiB file in 16 MiB engine reads ran 1.4-1.7 GB/s into 4 KiB pages and 3.4-3.8 GB/s into 2 MiB pages, the
same requests. The pool's blocks are private anonymous mappings (a shared one would be shmem, which transparent
huge pages leave alone) advised MADV_HUGEPAGE, 2 MiB aligned, faulted in, and registered with CUDA (portable and
mapped, so gpu.mapped_view works on them).

Slots stay registered from one use to the next (registration pins and maps every page: a cost per slot, not per
read), per process: a forked child's copies were never registered, so a child starts its own pool (the C++ pool
checks the process id). `page_locked_stats` is the one report of the process's page-locked bytes.
"""
from __future__ import annotations

import os
import threading
import weakref

from . import _core

HUGE_PAGE = 2 << 20


def _cuda_usable() -> bool:
    """CUDA can register memory here: torch sees a device and this is not a forked child of a CUDA process."""
    import torch

    from .gpu import in_bad_fork

    return torch.cuda.is_available() and not in_bad_fork()


def page_locked(nbytes: int):
    """A uint8 torch tensor of nbytes in page-locked host memory (an owned block of the one pool: 2 MiB pages where
    the kernel gives them), unregistered and unmapped when the last view of it is gone; or None where it cannot be
    had: no CUDA, a forked child of a CUDA process, nbytes 0, or CUDA refusing the registration (RLIMIT_MEMLOCK,
    say). The caller falls back to what suits it."""
    if nbytes <= 0 or not _cuda_usable():
        return None
    import torch

    block = _core.pinned_take(nbytes, registered=True, pooled=False, use="host_buffer")
    if not block.registered:
        block.give()
        return None
    return torch.from_numpy(block.array())  # the array, and so the tensor and its views, keep the block alive


def torch_pinned(nbytes: int, align: int = 4096):
    """A uint8 tensor of nbytes in page-locked memory from torch's caching allocator (which tracks it for async
    copies and keeps it for the next request), its address `align` aligned: torch's block when it already is, else
    a view into one of nbytes + align. Where the pool's 2 MiB pages are not wanted or not given (see above)."""
    import torch

    t = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    if t.data_ptr() % align == 0:
        return t
    t = torch.empty(nbytes + align, dtype=torch.uint8, pin_memory=True)
    skip = (-t.data_ptr()) % align
    return t[skip:skip + nbytes]


def _reset_after_fork() -> None:
    """A forked child: the parent's slots are not this process's pool's (the C++ pool forgets them too)."""
    global _lock, _in_use
    _lock = threading.Lock()
    _in_use = weakref.WeakValueDictionary()


_lock = threading.Lock()
# slot address -> its block, while a caller holds the slot: give_slot finds the block there. Weak: a slot dropped
# without give_slot (an error path) goes back to the pool when its last view does.
_in_use: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
os.register_at_fork(after_in_child=_reset_after_fork)


def take_slot(nbytes: int, registered: bool = True):
    """A uint8 torch tensor of nbytes on a pooled block of the one pool (a free block of its size when there is one),
    registered with CUDA; or None where page_locked gives none. registered=False: the same slot not page-locked
    (tests, CPU-only callers). Hand it back with give_slot once nothing reads or writes it any more."""
    if nbytes <= 0 or (registered and not _cuda_usable()):
        return None
    import torch

    block = _core.pinned_take(nbytes, registered=registered, pooled=True, use="slots")
    if registered and not block.registered:
        block.give()
        return None
    slot = torch.from_numpy(block.array())
    with _lock:
        _in_use[slot.data_ptr()] = block
    return slot


def give_slot(slot) -> None:
    """Return a slot take_slot gave (in this process) to the pool now, for the next take_slot of its size. The slot's
    views must not be used after it."""
    with _lock:
        block = _in_use.pop(slot.data_ptr(), None)
    if block is not None:
        block.give()


def pool_stats() -> dict:
    """Bytes of the slots (take_slot) in the pool: made_bytes (in use or free) and free_bytes (not in use now)."""
    slots = _core.pinned_pool_stats()["uses"].get("slots", {})
    return {"made_bytes": slots.get("made_bytes", 0), "free_bytes": slots.get("free_bytes", 0)}


def page_locked_stats() -> dict:
    """The process's page-locked host memory, all of it from or counted by the one pinned pool: pools (1),
    page_locked_bytes (every page-locked byte gpuio holds: pooled and owned blocks registered with CUDA, and the GPU
    layer's fixed cudaHostAlloc's), pool (the pool's whole report, _core.pinned_pool_stats: pooled made/registered/
    free bytes, owned_bytes, fixed_bytes, and by use: slots, plan_reader, engine_staging, stream_bounce,
    array_staging, host_buffer, stream_buffers, gpu_queues, ...) and plan_reader (the plan reader's rings' share)."""
    pool = dict(_core.pinned_pool_stats())
    plan = pool["uses"].get("plan_reader", {})
    return {"pools": pool["pools"], "page_locked_bytes": pool["page_locked_bytes"], "pool": pool,
            "plan_reader": {k: plan.get(k, 0) for k in ("made_bytes", "registered_bytes", "free_bytes")}}


def release_slots() -> int:
    """Let go of the pool's free blocks (slots and the plan reader's rings not in use now: unregistered and
    unmapped); returns the bytes let go."""
    return int(_core.pinned_pool_release())


def huge_page_bytes() -> int:
    """Bytes of the pool's free blocks (those not in use now) that lie in 2 MiB pages (AnonHugePages of
    /proc/self/smaps over the mappings holding them): whether the kernel gave what MADV_HUGEPAGE asked for. 0 where
    smaps is not there.
    Reads all of smaps: for benchmarks and tests, not for a load's path."""
    starts = sorted(address for address, _ in _core.pinned_pool_free_blocks())
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
