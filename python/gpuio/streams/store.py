"""StreamStore: SSDStreamer's stream store on top of gpuio.Engine.

    with StreamStore("streams.bin", mode="c") as store:   # mode="c": create it when missing
        sd = store.create_stream()
        store.write_stream(sd, np.arange(10))
        store.close_stream(sd)                  # durable from here on
        rd = store.open_stream(sd.stream_id)
        while (obj := store.read_stream(rd)) is not None: ...

Memory: the buffer pool (``buffer_pool_bytes``), the free pool (1 byte per device block), and 8 bytes per
stream id (the first sblock's packed location). Thread-safe: one lock serialises the API calls.
See format.py for the layout and writer.py for the durability order.

Opening never formats a file by accident. ``mode`` says what may happen to the device file(s):
  "r+" (default)  open an existing store; a missing path raises FileNotFoundError, a file that holds no
                  store (including one whose first block is all zeros) raises StreamStoreCorrupt.
  "c"             like "r+", but missing paths (or empty, 0-byte files) are created, ``create_bytes`` in
                  all (sparse; default 1 GiB), and formatted. An existing non-empty file that holds no
                  store is still refused.
  "w"             format whatever is there (a new store: existing content, a store included, is lost);
                  missing paths are created as with "c".
"""
from __future__ import annotations

import errno
import os
import secrets
import threading
import warnings

import numpy as np

from ..engine import DEFAULTS as ENGINE_DEFAULTS
from ..engine import aligned_empty
from . import chain
from .buffers import BufferPool
from .format import (SBLOCK_BYTES_MAX, SUPER_MAGIC, TRAILER_BYTES, StreamStoreCorrupt, StreamStoreWarning, Superblock,
                     blocks_for, entry_unpack)
from .freepool import FreePool
from .reader import StreamReader
from .serializer import decode
from .table import StreamTable
from .writer import StreamWriter

DEFAULTS = {
    "sblock_bytes": 4 << 20,          # one sblock: the unit of chaining, allocation and read-ahead
    "prefetch_depth": 4,              # sblocks read ahead per open reader; writes in flight per writer (+1 filling)
    "buffer_pool_bytes": 64 << 20,    # all open streams' buffers together
    "mode": "r+",                     # "r+": open an existing store, "c": create when missing, "w": format
    "create_bytes": 1 << 30,          # size of the file(s) that mode "c"/"w" creates (sparse), all devices together
    "streams_max": 1 << 17,           # stream ids in the table (fixed when the store is formatted)
    "block_size": ENGINE_DEFAULTS["block_size"],  # engine block size (fixed when the store is formatted)
    "durable": True,                  # close/destroy return after an engine sync(); False: the OS decides
    "checksum_payload": True,         # CRC-32C of each sblock's payload, verified on read (metadata always has
                                      #   CRCs); cost vs read throughput: benchmarks/streams_bench.py
}


MODES = ("r+", "c", "w")


def _holds_data(path: str) -> bool:
    """True for an existing device or non-empty file; an empty regular file counts as missing."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    return not (os.path.isfile(path) and st.st_size == 0)


def _names(paths: list) -> str:
    return paths[0] if len(paths) == 1 else str(paths)


def _remove(paths: list) -> None:
    for p in paths:
        try:
            os.unlink(p)
        except OSError:
            pass


class OpenStream:
    """What create_stream/open_stream return: the stream id and the open writer or reader."""
    __slots__ = ("stream_id", "mode", "_store", "_io", "__weakref__")

    def __init__(self, store, stream_id, mode, io):
        self.stream_id, self.mode, self._store, self._io = stream_id, mode, store, io

    @property
    def closed(self) -> bool:
        """True once close_stream() (or closing the store) has closed it."""
        return self._io is None

    @property
    def speculation_misses(self) -> int:
        """Reader: sblocks whose prefetch guessed the next extent wrong and were read again (0 for a writer)."""
        return int(getattr(self._io, "speculation_misses", 0))

    def __repr__(self) -> str:
        state = "closed" if self._io is None else "open"
        return f"<stream {self.stream_id} {'writer' if self.mode == 'w' else 'reader'}, {state}>"


class StreamStore:
    """SSDStreamer's stream store (see the module docstring).

    Thread safety: every public method may be called from any thread; one re-entrant lock serialises the
    calls (an I/O wait inside one call holds it). A OpenStream belongs to its store and may be passed
    between threads, but two threads interleaving writes to one stream get an interleaved stream. One
    process per device set: the engine's exclusive flock (``lock=True``) refuses a second opener."""

    def __init__(self, path_or_paths, sblock_bytes: int = DEFAULTS["sblock_bytes"],
                 prefetch_depth: int = DEFAULTS["prefetch_depth"],
                 buffer_pool_bytes: int = DEFAULTS["buffer_pool_bytes"], *, mode: str = DEFAULTS["mode"],
                 create_bytes: int = DEFAULTS["create_bytes"], streams_max: int = DEFAULTS["streams_max"],
                 block_size: int = DEFAULTS["block_size"], durable: bool = DEFAULTS["durable"],
                 checksum_payload: bool = DEFAULTS["checksum_payload"], **engine_options):
        from ..engine import Engine, open_files

        if not isinstance(sblock_bytes, int) or sblock_bytes % block_size or not \
                block_size <= sblock_bytes <= SBLOCK_BYTES_MAX:
            raise ValueError(f"sblock_bytes {sblock_bytes!r} must be a multiple of block_size {block_size} "
                             f"and at most {SBLOCK_BYTES_MAX}")
        if not isinstance(prefetch_depth, int) or prefetch_depth < 2:
            raise ValueError(f"prefetch_depth must be an int >= 2, got {prefetch_depth!r}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES} ('r+': open an existing store, 'c': create it when "
                             f"missing, 'w': format), got {mode!r}")
        given = [path_or_paths] if isinstance(path_or_paths, (str, os.PathLike)) else list(path_or_paths)
        paths: list[str] = [os.fspath(p) for p in given]
        exists = [_holds_data(p) for p in paths]
        if any(exists) and not all(exists):
            missing = [p for p, e in zip(paths, exists) if not e]
            raise FileNotFoundError(errno.ENOENT, f"stream store device(s) {missing} missing while others exist")
        created: list[str] = []
        if not any(exists):
            if mode == "r+":
                raise FileNotFoundError(errno.ENOENT, f"no stream store at {_names(paths)}; pass mode='c' to "
                                        f"create one (create_bytes={create_bytes}, sparse)")
            if not isinstance(create_bytes, int) or create_bytes < sblock_bytes * len(paths):
                raise ValueError(f"create_bytes {create_bytes!r} must be an int >= one sblock per device "
                                 f"({sblock_bytes * len(paths)})")
            per = -(-create_bytes // len(paths) // sblock_bytes) * sblock_bytes
            for p in paths:
                if not os.path.exists(p):
                    created.append(p)  # removed again if this call fails
                Engine.create_file(p, per)
            fresh = True
        else:
            fresh = mode == "w"
        self.sblock_bytes = sblock_bytes
        self.prefetch_depth = prefetch_depth
        self.block_size = self.block_bytes = block_size
        self.sblock_blocks = sblock_bytes // block_size
        self.durable = durable
        self.checksum_payload = checksum_payload
        self._lock = threading.RLock()
        self._writers: dict[int, OpenStream] = {}
        self._readers: dict[int, int] = {}       # stream id -> open readers
        self._consumers: set[StreamReader] = set()  # read_and_destroy readers: hold blocks off the table
        # One store per device set: the exclusive lock also makes a restart after kill -9 wait until the
        # killed process's in-flight writes have ended (the kernel drops the lock only then).
        engine_options.setdefault("lock", True)
        self.paths = paths
        try:
            # A target of the process engine (or of engine=, or an engine of its own for engine-wide options).
            self._engine = open_files(paths, block_size=block_size, **engine_options)
        except BaseException:
            _remove(created)
            raise
        try:
            self._sb = self._mount(streams_max, fresh)
            self._buffers = BufferPool(buffer_pool_bytes, sblock_bytes)
            self._meta_buf = aligned_empty(2 * block_size)
        except BaseException:
            self._engine.close()
            _remove(created)  # a file this call created and could not format is not left behind
            raise

    # -- mount ------------------------------------------------------------------------------------------
    def _mount(self, streams_max: int, fresh: bool) -> Superblock:
        """Reads the store's superblock, or (``fresh``: a new file or mode "w") writes a new one."""
        bb, total = self.block_bytes, self._engine.total_blocks
        head = aligned_empty(bb)
        if not fresh:
            self._engine.read(np.zeros(1, dtype=np.int64), head)
            if bytes(head[:len(SUPER_MAGIC)]) != SUPER_MAGIC:
                what = "its first block is all zeros" if not head.any() else \
                    f"superblock magic {bytes(head[:len(SUPER_MAGIC)])!r}"
                raise StreamStoreCorrupt(errno.EINVAL, f"{_names(self.paths)} is not a gpuio stream store "
                                         f"({what}); nothing was changed. mode='w' formats it, destroying "
                                         f"its contents")
        if fresh:  # format; the uuid disowns any older table pages
            sb = Superblock.plan(bb, total, streams_max, secrets.randbits(63) + 1)
            # Zero the table region first: a table stamp that is neither zeros nor intact is then damage,
            # never leftovers of whatever the device held before (see format.page_unpack).
            zeros = aligned_empty((sb.data_start - sb.table_start) * bb)
            zeros[:] = 0
            self._engine.write(np.arange(sb.table_start, sb.data_start, dtype=np.int64), zeros)
            head[:] = 0
            raw = sb.pack()
            head[:len(raw)] = np.frombuffer(raw, dtype=np.uint8)
            self._engine.write(np.zeros(1, dtype=np.int64), head)
            self._engine.sync()
        else:
            sb = Superblock.unpack(head)
        if sb.block_bytes != bb:
            raise ValueError(f"store was formatted with block_size {sb.block_bytes}, opened with {bb}")
        if sb.total_blocks > total:
            raise StreamStoreCorrupt(f"store was formatted for {sb.total_blocks} blocks, device has {total}")
        self._sb = sb
        self._table = StreamTable(sb)
        region = aligned_empty(2 * sb.table_pages * bb)
        self._engine.read(np.arange(sb.table_start, sb.data_start, dtype=np.int64), region)
        self._table.load(region)
        del region
        for msg in self._table.damaged:  # check() raises on them too
            warnings.warn(f"{self._engine.paths}: {msg}", StreamStoreWarning, stacklevel=3)
        self._pool = FreePool(sb.total_blocks, sb.data_start)
        ids = self._table.live_ids()
        chain.walk(self._engine, sb, ((i, self._table.entries[i]) for i in ids),
                   lambda sid, index, start, used, t: self._pool.mark_used(start, used))
        return sb

    # -- stream API -------------------------------------------------------------------------------------
    def create_stream(self) -> OpenStream:
        """A new, empty stream open for writing; its stream_id is fixed from here on."""
        with self._lock:
            self._check_open()
            sid = self._table.next_free_id(self._writers)
            if sid < 0:
                raise OSError(28, f"stream table full: all {self._sb.streams_max} stream ids in use")
            # prefetch_depth sblock writes in flight behind the one being filled (at least 2 slots)
            slots = self._buffers.take(self.prefetch_depth + 1, 2, f"new stream {sid}")
            try:
                w = StreamWriter(self, sid, slots)
            except BaseException:
                self._buffers.give(slots)
                raise
            sd = OpenStream(self, sid, "w", w)
            self._writers[sid] = sd
            return sd

    def write_stream(self, sd: OpenStream, data) -> None:
        """Append one object (tensor, array, bytes, or anything picklable) to a stream open for writing."""
        with self._lock:
            w = self._handle(sd, "w", "write to")
            if data is None:
                raise ValueError(f"cannot write None to stream {sd.stream_id}: read_stream returns None at the end")
            try:
                w.write(data)
            except OSError as e:
                if e.errno != 28:  # an I/O error: the stream cannot be closed consistently any more
                    self._drop_writer(sd)
                raise

    def close_stream(self, sd: OpenStream) -> None:
        """Close a stream: a writer's stream becomes durable (and readable) here; a reader's buffer slots return to
        the pool."""
        with self._lock:
            if not isinstance(sd, OpenStream) or sd._store is not self:
                raise ValueError(f"{sd!r} is not a stream handle of this store")
            if sd._io is None:
                raise ValueError(f"stream {sd.stream_id} is already closed")
            if sd.mode == "r":
                return self._close_reader(sd)
            try:
                entry = sd._io.close()
                self._publish(sd.stream_id, entry)
            except BaseException:
                self._drop_writer(sd)
                raise
            self._buffers.give(sd._io.slots)
            del self._writers[sd.stream_id]
            sd._io = None

    def open_stream(self, stream_id: int) -> OpenStream:
        """Open a closed stream for reading from its first object (several readers may share a stream)."""
        with self._lock:
            entry = self._entry(stream_id)
            slots = self._buffers.take(self.prefetch_depth, 1, f"reader of stream {stream_id}")
            try:
                r = StreamReader(self, stream_id, entry, slots)
            except BaseException:
                self._buffers.give(slots)
                raise
            self._readers[stream_id] = self._readers.get(stream_id, 0) + 1
            return OpenStream(self, stream_id, "r", r)

    def read_stream(self, sd: OpenStream, device=None):
        """The next object of the stream, or None at its end. ``device``: where tensors go (e.g. "cuda")."""
        with self._lock:
            r = self._handle(sd, "r", "read from")
            if r.at_end():
                return None
            if device is not None and str(device).startswith("cuda"):
                self._buffers.pin_for_cuda()  # once: CUDA-bound bytes leave the slots by DMA
            return decode(r, device)

    def destroy_stream(self, stream_id: int) -> None:
        """Delete a closed stream and free its blocks (KeyError when there is no such stream)."""
        with self._lock:
            entry = self._entry(stream_id)
            if self._readers.get(stream_id):
                raise ValueError(f"stream {stream_id} is open for reading ({self._readers[stream_id]} readers); "
                                 f"close them before destroying it")
            # Walk first (reads only), then unpublish, then free: an I/O error at any step leaves the
            # stream either fully there or fully gone, and never frees blocks that the table still names.
            extents = []
            chain.walk(self._engine, self._sb, [(stream_id, entry)],
                       lambda sid, index, start, used, t: extents.append((start, used)))
            self._publish(stream_id, 0)
            for start, used in extents:
                self._pool.free(start, used)

    def read_and_destroy_stream(self, stream_id: int) -> OpenStream:
        """Opens the stream for one consuming read: it leaves the table at once (durably), and each sblock's
        blocks return to the free pool as soon as the reader has moved past it."""
        with self._lock:
            entry = self._entry(stream_id)
            if self._readers.get(stream_id):
                raise ValueError(f"stream {stream_id} is open for reading; close it before read_and_destroy")
            slots = self._buffers.take(self.prefetch_depth, 1, f"reader of stream {stream_id}")
            self._publish(stream_id, 0)
            r = StreamReader(self, stream_id, entry, slots, destroy=True)
            self._readers[stream_id] = 1
            self._consumers.add(r)
            return OpenStream(self, stream_id, "r", r)

    @property
    def engine(self):
        """The gpuio.Engine under the store (its stats; raw reads of the store's blocks in benchmarks)."""
        return self._engine

    def stream_blocks(self, stream_id: int) -> list[tuple[int, int]]:
        """(first block, blocks used) of each sblock of a closed stream, in order, each trailer checked.
        KeyError when the store holds no such stream."""
        with self._lock:
            if stream_id not in self:
                raise KeyError(f"stream {stream_id} is not in the store")
            return list(self._chain_from(stream_id, *entry_unpack(self._table.entries[stream_id]), 0))

    def streams(self) -> list[int]:
        """Ids of the closed (published) streams."""
        with self._lock:
            return [int(i) for i in self._table.live_ids()]

    def __contains__(self, stream_id) -> bool:
        with self._lock:
            return bool(isinstance(stream_id, (int, np.integer)) and 0 <= stream_id < self._sb.streams_max and
                        self._table.entries[stream_id] != 0)

    # -- maintenance ------------------------------------------------------------------------------------
    def check(self) -> dict:
        """Verifies the on-disk table equals memory, every chain is intact, no block belongs to two sblocks,
        and the free pool is exactly the complement of the used blocks. Raises StreamStoreCorrupt naming the
        first problem; returns counts."""
        from .check import check_store
        with self._lock:
            self._check_open()
            return check_store(self)

    def stats(self) -> dict:
        """Streams, open writers and readers, free and total blocks, buffer slots (free, all, pinned for CUDA),
        and the engine's stats."""
        with self._lock:
            return {"streams": len(self._table.live_ids()), "writers_open": len(self._writers),
                    "readers_open": sum(self._readers.values()), "free_blocks": self._pool.free_blocks,
                    "total_blocks": self._sb.total_blocks, "buffer_slots_free": self._buffers.free_slots,
                    "buffer_slots": self._buffers.slots_max,
                    "buffer_pinned_for_cuda": self._buffers.pinned, "engine": self._engine.stats()}

    def close(self) -> None:
        """Closes readers, drops writers that were never closed (their streams do not exist), stops the engine."""
        with self._lock:
            if self._engine.closed:
                return
            for sd in list(self._writers.values()):
                self._drop_writer(sd)
            self._engine.close()
            self._buffers.unpin()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- internals --------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._engine.closed:
            raise ValueError("stream store is closed")

    def _entry(self, stream_id) -> int:
        self._check_open()
        if not isinstance(stream_id, (int, np.integer)) or isinstance(stream_id, bool):
            raise TypeError(f"stream id must be an int, got {stream_id!r}")
        if stream_id in self._writers:
            raise ValueError(f"stream {stream_id} is still being written; close it before reading or destroying")
        if not 0 <= stream_id < self._sb.streams_max or self._table.entries[stream_id] == 0:
            raise KeyError(f"no stream {stream_id} in this store (never closed, destroyed, or unknown)")
        return int(self._table.entries[stream_id])

    def _handle(self, sd, mode: str, verb: str):
        self._check_open()
        if not isinstance(sd, OpenStream) or sd._store is not self:
            raise ValueError(f"{sd!r} is not a stream handle of this store")
        if sd._io is None:
            raise ValueError(f"cannot {verb} stream {sd.stream_id}: its handle is closed")
        if sd.mode != mode:
            raise ValueError(f"cannot {verb} stream {sd.stream_id}: it is open for "
                             f"{'writing' if sd.mode == 'w' else 'reading'}")
        return sd._io

    def _close_reader(self, sd: OpenStream) -> None:
        r = sd._io
        r.close()
        if r.destroy:  # free what the consuming read did not reach
            rest = r.remaining_entry()
            if rest is not None:
                for start, used in list(self._chain_from(sd.stream_id, *rest)):
                    self._pool.free(start, used)
            self._consumers.discard(r)
        self._buffers.give(r.slots)
        n = self._readers[sd.stream_id] - 1
        if n:
            self._readers[sd.stream_id] = n
        else:
            del self._readers[sd.stream_id]
        sd._io = None

    def _chain_from(self, sid: int, start: int, eff: int, index: int):
        """Yields (start, used_blocks) of each sblock from the given one to the end, checking each trailer."""
        bb, buf = self.block_bytes, self._meta_buf
        while True:
            chain.check_extent(self._sb, sid, index, start, eff)
            self._engine.read(np.array(chain.trailer_blocks(start, eff, bb), dtype=np.int64), buf)
            t = chain.validate(self._sb, buf, (eff - TRAILER_BYTES) % bb, sid, index, start, eff)
            yield start, blocks_for(eff, bb)
            if t.end:
                return
            start, eff, index = t.next_start, t.next_eff, index + 1

    def _open_consumers(self):
        return iter(self._consumers)

    def _drop_writer(self, sd: OpenStream) -> None:
        w = sd._io
        if w is None:
            return
        w.abort()
        self._buffers.give(w.slots)
        self._writers.pop(sd.stream_id, None)
        sd._io = None

    def _publish(self, stream_id: int, entry: int) -> None:
        """Sets a table entry and writes its page (shadow slot), then syncs: durable when this returns."""
        t = self._table
        page = t.page_of(stream_id)
        old = t.entries[stream_id]
        t.entries[stream_id] = entry
        try:
            block, slot, seq = t.image(page, self._meta_buf[:self.block_bytes])
            self._engine.write(np.array([block], dtype=np.int64), self._meta_buf[:self.block_bytes])
            self._sync_data()
        except BaseException:
            t.entries[stream_id] = old
            raise
        t.committed(page, slot, seq)

    def _sync_data(self) -> None:
        if self.durable:
            self._engine.sync()
