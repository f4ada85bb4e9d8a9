"""Stream store (SSDStreamer, DESIGN.md layer 6): streams of objects kept on SSD as chained sblocks,
read back through a small prefetching DRAM buffer; ``Cache`` for iterative ML on top of it."""
from __future__ import annotations

from .format import StreamStoreCorrupt, StreamStoreWarning
from .store import DEFAULTS, StreamHandle, StreamStore

__all__ = ["StreamStore", "StreamHandle", "StreamStoreCorrupt", "StreamStoreWarning", "Cache", "DEFAULTS"]


def __getattr__(name):
    if name == "Cache":
        from .cache import Cache
        return Cache
    raise AttributeError(f"module 'gpuio.streams' has no attribute {name!r}")
