"""Stream store (SSDStreamer, DESIGN.md layer 5, beside the tensor store): streams of objects kept on SSD as
chained sblocks, read back through a small prefetching DRAM buffer; ``DatasetCache`` for iterative ML on top of it."""
from __future__ import annotations

from .dataset_cache import DatasetCache
from .format import StreamStoreCorrupt, StreamStoreWarning, crc32c_hardware, payload_crc
from .store import DEFAULTS, OpenStream, StreamStore

__all__ = ["StreamStore", "OpenStream", "StreamStoreCorrupt", "StreamStoreWarning", "DatasetCache", "DEFAULTS",
           "payload_crc", "crc32c_hardware"]

