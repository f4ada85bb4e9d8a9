"""DatasetCache: keep a derived dataset on SSD as one stream, stream it back every epoch.

    cache = DatasetCache("features.bin", mode="c")         # or DatasetCache(store); mode: see StreamStore
    cache.get_or_fill(lambda: (expensive(x) for x in raw_batches()))
    for epoch in range(10):
        for batch in cache:                         # read ahead through the store's prefetching buffer
            step(batch)

Only the stream buffer (``prefetch_depth`` sblocks; one more while writing) lives in DRAM, whatever the
dataset's size.
"""
from __future__ import annotations

from typing import Callable, Iterable, Iterator

from .store import StreamStore


class DatasetCache:
    """A derived dataset kept on SSD as one stream of batches: fill() once, iterate every epoch (see the module
    docstring)."""
    def __init__(self, store_or_path, stream_id: int | None = None, device=None, **store_options):
        """``stream_id``: a dataset cached earlier in this store (see ``stream_id`` after fill()).
        ``device``: where tensors and arrays are delivered (None: host; "cuda": torch tensors on the GPU)."""
        if isinstance(store_or_path, StreamStore):
            if store_options:
                raise TypeError(f"store options {sorted(store_options)} given with an open StreamStore")
            self.store, self._owns = store_or_path, False
        else:
            self.store, self._owns = StreamStore(store_or_path, **store_options), True
        if stream_id is not None and stream_id not in self.store:
            self.close()
            raise KeyError(f"no cached dataset: stream {stream_id} is not in the store")
        self.stream_id = stream_id
        self.device = device
        self._len: int | None = None

    @property
    def filled(self) -> bool:
        """True once a fill has completed (or stream_id named an earlier one)."""
        return self.stream_id is not None

    def fill(self, batches: Iterable) -> int:
        """Writes every batch into a new stream (replacing a previous fill once the new one is durable).
        Returns the number of batches."""
        sd = self.store.create_stream()
        n = 0
        try:
            for b in batches:
                self.store.write_stream(sd, b)
                n += 1
            self.store.close_stream(sd)
        except BaseException:
            self.store.abort_stream(sd)
            raise
        old, self.stream_id, self._len = self.stream_id, sd.stream_id, n
        if old is not None:
            self.store.destroy_stream(old)
        return n

    def get_or_fill(self, make_batches: Callable[[], Iterable]) -> "DatasetCache":
        """Fill from make_batches() unless already filled; returns self for iteration."""
        if not self.filled:
            self.fill(make_batches())
        return self

    def __iter__(self) -> Iterator:
        if not self.filled:
            raise ValueError("cache is empty: call fill() or get_or_fill() first")
        sd = self.store.open_stream(self.stream_id)  # type: ignore[arg-type]  # filled: an int
        n = 0
        try:
            while (obj := self.store.read_stream(sd, self.device)) is not None:
                n += 1
                yield obj
        finally:
            self.store.close_stream(sd)
        self._len = n

    def __len__(self) -> int:
        if self._len is None:
            self._len = sum(1 for _ in self)
        return self._len

    def clear(self) -> None:
        """Destroy the cached stream (its blocks return to the store); filled is False after."""
        if self.stream_id is not None:
            self.store.destroy_stream(self.stream_id)
        self.stream_id, self._len = None, None

    def close(self) -> None:
        """Close the store when this cache opened it (a store passed in stays open)."""
        if self._owns:
            self.store.close()

    def __enter__(self) -> "DatasetCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

__all__ = ["DatasetCache"]
