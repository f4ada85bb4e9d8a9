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
  "r"             open an existing store read-only, without the writer lock: any number of processes read it
                  beside its one writer. Streams are what the table held when it was read (refresh() reads it
                  again; open_stream of an id not seen does so once). Writes are refused.
  "r+" (default)  open an existing store; a missing path raises FileNotFoundError, a file that holds no
                  store (including one whose first block is all zeros) raises StreamStoreCorrupt.
  "c"             like "r+", but missing paths (or empty, 0-byte files) are created, ``create_bytes`` in
                  all (sparse; default 1 GiB), and formatted. An existing non-empty file that holds no
                  store is still refused.
  "w"             format whatever is there (a new store: existing content, a store included, is lost);
                  missing paths are created as with "c".

Other processes (DataLoader workers, spawned ranks, forked children): a store pickles as its paths and options and
reopens in the receiver, never formatting: as a writer ("r+", with the lock) when the receiver gets the writer
lock at once, else (the sender, or another process, holds it; or the store has no lock) read-only ("r").
A forked child reopens an inherited store the same way on its first call. An open reader travels as its stream id
and position; a stream open for writing does not travel, and in a forked child writes through an inherited
writer are refused (the stream is the parent's to finish). See gpuio.streams.travel.
"""
from __future__ import annotations

import errno
import os
import secrets
import threading
import warnings
import weakref

import numpy as np

from .._forked import ForkAware, options_here
from ..defaults import defaults_of
from ..engine import aligned_empty, fork_generation
from ..gpu import refuse_bad_fork
from . import chain, devices, travel
from .buffers import BufferPool
from .format import SBLOCK_BYTES_MAX, SUPER_MAGIC, StreamStoreCorrupt, StreamStoreWarning, Superblock, entry_unpack
from .reader import StreamReader
from .serializer import decode
from .state import StoreState
from .writer import StreamWriter

DEFAULTS = defaults_of("streams")  # StreamStore's keywords: a view of gpuio.defaults' streams rows


MODES = ("r", "r+", "c", "w")


def _release(target) -> None:
    """weakref.finalize of a store never closed: its device set closes with it (fds and the lock do not linger)."""
    try:
        target.close()
    except Exception:  # noqa: BLE001 - at collection or exit there is no caller to tell
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
    def io(self):
        """This process's StreamWriter or StreamReader behind the handle (None once closed): what gpuio.streams'
        own modules (the checker, the process-crossing code) look at and set; not a user API."""
        return self._io

    @io.setter
    def io(self, io) -> None:
        self._io = io

    @property
    def speculation_misses(self) -> int:
        """Reader: sblocks whose prefetch guessed the next extent wrong and were read again (0 for a writer)."""
        return self._io.speculation_misses if isinstance(self._io, StreamReader) else 0

    def __repr__(self) -> str:
        state = "closed" if self._io is None else "open"
        return f"<stream {self.stream_id} {'writer' if self.mode == 'w' else 'reader'}, {state}>"

    def __reduce__(self):
        """A reader pickles as its store, stream id and position: the receiver reads on from there (with a reader
        of its own: the sender's reader is unaffected). A writer, or a consuming reader, does not travel."""
        return self._store._reduce_reader(self)


class StreamStore(ForkAware, travel.Travelling):
    """SSDStreamer's stream store (see the module docstring).

    Thread safety: every public method may be called from any thread; one re-entrant lock serialises the
    calls (an I/O wait inside one call holds it). A OpenStream belongs to its store and may be passed
    between threads, but two threads interleaving writes to one stream get an interleaved stream. One
    writer per device set: the engine's exclusive flock (``lock=True``) refuses a second writer; readers
    (mode "r") take no lock."""

    def __init__(self, path_or_paths, sblock_bytes: int = DEFAULTS["sblock_bytes"],
                 prefetch_depth: int = DEFAULTS["prefetch_depth"],
                 buffer_pool_bytes: int = DEFAULTS["buffer_pool_bytes"], *, mode: str = DEFAULTS["mode"],
                 create_bytes: int = DEFAULTS["create_bytes"], streams_max: int = DEFAULTS["streams_max"],
                 block_size: int = DEFAULTS["block_size"], durable: bool = DEFAULTS["durable"],
                 checksum_payload: bool = DEFAULTS["checksum_payload"], **engine_options):
        if not isinstance(sblock_bytes, int) or sblock_bytes % block_size or not \
                block_size <= sblock_bytes <= SBLOCK_BYTES_MAX:
            raise ValueError(f"sblock_bytes {sblock_bytes!r} must be a multiple of block_size {block_size} "
                             f"and at most {SBLOCK_BYTES_MAX}")
        if not isinstance(prefetch_depth, int) or prefetch_depth < 2:
            raise ValueError(f"prefetch_depth must be an int >= 2, got {prefetch_depth!r}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES} ('r': read an existing store without the writer lock, "
                             f"'r+': open an existing store, 'c': create it when missing, 'w': format), got {mode!r}")
        given = [path_or_paths] if isinstance(path_or_paths, (str, os.PathLike)) else list(path_or_paths)
        paths: list[str] = [os.fspath(p) for p in given]
        fresh, created = devices.prepare(paths, mode, create_bytes, sblock_bytes)
        self._settings: dict = dict(sblock_bytes=sblock_bytes, prefetch_depth=prefetch_depth,
                              buffer_pool_bytes=buffer_pool_bytes, block_size=block_size, durable=durable,
                              checksum_payload=checksum_payload)
        # One writer per device set: the exclusive lock also makes a restart after kill -9 wait until the
        # killed process's in-flight writes have ended (the kernel drops the lock only then).
        engine_options.setdefault("lock", True)
        self._engine_options = dict(engine_options)  # as given: another process reopens with them
        try:
            self._open(paths, writable=mode != "r", fresh=fresh, streams_max=streams_max)
        except BlockingIOError as e:
            devices.remove(created)
            raise BlockingIOError(e.errno, f"{e.strerror}: another StreamStore holds the writer lock of "
                                  f"{devices.names(paths)} (in this process or another); mode='r' reads beside "
                                  f"its writer") from e
        except BaseException:
            devices.remove(created)  # a file this call created and could not format is not left behind
            raise

    def _open(self, paths: list, writable: bool, fresh: bool = False, streams_max: int = 0,
              lock_wait_ms: int | None = None, read_only_why: str = "it was opened with mode='r'") -> None:
        """Open the device set (a target of the process engine, of engine=, or of an engine of its own for
        engine-wide options) and mount the store on it: this process's state, from scratch. writable=False opens
        it read-only without the lock; read_only_why then says why in the refusal of a write."""
        from ..engine import open_files

        st: dict = self._settings
        self.sblock_bytes: int = st["sblock_bytes"]
        self.prefetch_depth: int = st["prefetch_depth"]
        self.buffer_pool_bytes: int = st["buffer_pool_bytes"]
        self.block_size = self.block_bytes = st["block_size"]
        self.durable: bool = st["durable"]
        self.checksum_payload: bool = st["checksum_payload"]
        self.sblock_blocks = self.sblock_bytes // self.block_size
        self.paths = paths
        self.writable = writable
        self._read_only_why = None if writable else read_only_why
        self._pid, self._closed = os.getpid(), False
        self._lock = threading.RLock()
        self._readers: dict[int, int] = {}       # stream id -> open readers
        self._reader_handles: "weakref.WeakSet[OpenStream]" = weakref.WeakSet()  # a fork reopens them
        options = options_here(dict(self._engine_options))
        if not writable:
            options.update(writable=False, lock=False)
        elif lock_wait_ms is not None:
            options["lock_wait_ms"] = lock_wait_ms
        engine = open_files(paths, block_size=self.block_size, **options)
        try:
            self._state = self._mount(engine, streams_max, fresh)
        except BaseException:
            engine.close()
            raise
        self._opened_here()
        # Dropped without close(): the device set closes with the store (its fds, and its lock, do not linger).
        self._finalizer = weakref.finalize(self, _release, engine)

    def __reduce__(self):
        """Pickled as what it is: paths, settings and engine options (engine= does not travel); the receiver
        reopens it, never formatting, as gpuio.streams.travel says (writer when it gets the lock at once, else
        read-only). Open streams stay the sender's: an OpenStream reader pickles on its own."""
        options = {k: v for k, v in self._engine_options.items() if k != "engine"}
        return (type(self)._arrive, (self.paths, self._settings, options, self.writable))

    def _after_fork(self) -> None:
        """A forked child: the parent's target, lock and buffers stay the parent's; reopen the store here (as a
        received one), let inherited readers go on from where they were, refuse writes through inherited writers."""
        self._finalizer.detach()  # the parent's target is the parent's to close
        self._reopen_in_child()

    # -- mount ------------------------------------------------------------------------------------------
    def _mount(self, engine, streams_max: int, fresh: bool) -> StoreState:
        """Reads the store's superblock, or (``fresh``: a new file or mode "w") writes a new one; then the table and
        the free pool (every chain walked): this process's StoreState."""
        bb, total = self.block_bytes, engine.total_blocks
        head = aligned_empty(bb)
        if not fresh:
            engine.read(np.zeros(1, dtype=np.int64), head)
            if bytes(head[:len(SUPER_MAGIC)]) != SUPER_MAGIC:
                what = "its first block is all zeros" if not head.any() else \
                    f"superblock magic {bytes(head[:len(SUPER_MAGIC)])!r}"
                raise StreamStoreCorrupt(errno.EINVAL, f"{devices.names(self.paths)} is not a gpuio stream store "
                                         f"({what}); nothing was changed. mode='w' formats it, destroying "
                                         f"its contents")
        if fresh:  # format; the uuid disowns any older table pages
            sb = Superblock.plan(bb, total, streams_max, secrets.randbits(63) + 1)
            # Zero the table region first: a table stamp that is neither zeros nor intact is then damage,
            # never leftovers of whatever the device held before (see format.page_unpack).
            zeros = aligned_empty((sb.data_start - sb.table_start) * bb)
            zeros[:] = 0
            engine.write(np.arange(sb.table_start, sb.data_start, dtype=np.int64), zeros)
            head[:] = 0
            raw = sb.pack()
            head[:len(raw)] = np.frombuffer(raw, dtype=np.uint8)
            engine.write(np.zeros(1, dtype=np.int64), head)
            engine.sync()
        else:
            sb = Superblock.unpack(head)
        if sb.block_bytes != bb:
            raise ValueError(f"store was formatted with block_size {sb.block_bytes}, opened with {bb}")
        if sb.total_blocks > total:
            raise StreamStoreCorrupt(f"store was formatted for {sb.total_blocks} blocks, device has {total}")
        state = StoreState(engine, sb, bb, self.sblock_blocks, self.durable, self.checksum_payload,
                           BufferPool(self.buffer_pool_bytes, self.sblock_bytes))
        state.table = state.load_table()
        for msg in state.table.damaged:  # check() raises on them too
            warnings.warn(f"{engine.paths}: {msg}", StreamStoreWarning, stacklevel=3)
        state.pool = state.walk_pool()
        return state

    # -- stream API -------------------------------------------------------------------------------------
    def create_stream(self) -> OpenStream:
        """A new, empty stream open for writing; its stream_id is fixed from here on."""
        self._this_process()
        with self._lock:
            self._check_writable("create a stream")
            sid = self._state.table.next_free_id(self._state.writers)
            if sid < 0:
                raise OSError(28, f"stream table full: all {self._state.sb.streams_max} stream ids in use")
            # prefetch_depth sblock writes in flight behind the one being filled (at least 2 slots)
            slots = self._state.buffers.take(self.prefetch_depth + 1, 2, f"new stream {sid}")
            try:
                w = StreamWriter(self._state, sid, slots)
            except BaseException:
                self._state.buffers.give(slots)
                raise
            sd = OpenStream(self, sid, "w", w)
            self._state.writers[sid] = sd
            return sd

    def write_stream(self, sd: OpenStream, data) -> None:
        """Append one object (tensor, array, bytes, or anything picklable) to a stream open for writing."""
        self._this_process()
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
        the pool. In a forked child, closing a writer inherited from the parent only drops the handle here."""
        self._this_process()
        with self._lock:
            if not isinstance(sd, OpenStream) or sd._store is not self:
                raise ValueError(f"{sd!r} is not a stream handle of this store")
            if sd._io is None:
                raise ValueError(f"stream {sd.stream_id} is already closed")
            if isinstance(sd._io, travel.Inherited):
                sd._io = None
                return None
            if sd.mode == "r":
                return self._close_reader(sd)
            try:
                entry = sd._io.close()
                self._publish(sd.stream_id, entry)
            except BaseException:
                self._drop_writer(sd)
                raise
            self._state.buffers.give(sd._io.slots)
            del self._state.writers[sd.stream_id]
            sd._io = None

    def abort_stream(self, sd: OpenStream) -> None:
        """Drop a stream open for writing without publishing it: it never exists, its blocks return to the pool.
        Nothing happens for a handle already closed (close_stream or a failed write closed it)."""
        self._this_process()
        with self._lock:
            if sd.closed:
                return
            self._handle(sd, "w", "abort")
            self._drop_writer(sd)

    def open_stream(self, stream_id: int) -> OpenStream:
        """Open a closed stream for reading from its first object (several readers may share a stream). A
        read-only store that has not seen stream_id reads the table again first (the writer may have published
        it since)."""
        self._this_process()
        with self._lock:
            return self._open_reader(stream_id)

    def _open_reader(self, stream_id: int, at=None) -> OpenStream:
        """A reader of stream_id from its start, or from `at` (a reader's position(), another process's say)."""
        if not self.writable and stream_id not in self._state.writers:
            self._check_open()
            if isinstance(stream_id, (int, np.integer)) and 0 <= stream_id < self._state.sb.streams_max and \
                    self._state.table.entries[stream_id] == 0:
                self._state.table = self._state.load_table()
        entry = self._entry(stream_id)
        slots = self._state.buffers.take(self.prefetch_depth, 1, f"reader of stream {stream_id}")
        try:
            r = StreamReader(self._state, stream_id, entry, slots, at=at)
        except BaseException:
            self._state.buffers.give(slots)
            raise
        self._readers[stream_id] = self._readers.get(stream_id, 0) + 1
        sd = OpenStream(self, stream_id, "r", r)
        self._reader_handles.add(sd)
        return sd

    def refresh(self) -> None:
        """Read the stream table again: the streams the writer published or destroyed since this store read it (a
        read-only store's view; a writable store is the writer, and its table is always current)."""
        self._this_process()
        with self._lock:
            self._check_open()
            if not self.writable:
                self._state.table = self._state.load_table()

    def read_stream(self, sd: OpenStream, device=None):
        """The next object of the stream, or None at its end. ``device``: where tensors go (e.g. "cuda"). A
        read-only store whose writer destroyed the stream meanwhile raises KeyError saying so."""
        cuda = device is not None and str(device).startswith("cuda")
        if cuda:
            refuse_bad_fork()
        self._this_process()
        with self._lock:
            r = self._handle(sd, "r", "read from")
            try:
                if r.at_end():
                    return None
                if cuda:
                    self._state.buffers.pin_for_cuda()  # once: CUDA-bound bytes leave the slots by DMA
                return decode(r, device)
            except StreamStoreCorrupt as e:
                if not self.writable:
                    self._state.table = self._state.load_table()
                    if int(self._state.table.entries[sd.stream_id]) != r.entry:
                        raise KeyError(f"stream {sd.stream_id} was destroyed by the store's writer while this "
                                       f"reader read it (its blocks now hold other data)") from e
                raise

    def destroy_stream(self, stream_id: int) -> None:
        """Delete a closed stream and free its blocks (KeyError when there is no such stream)."""
        self._this_process()
        with self._lock:
            self._check_writable(f"destroy stream {stream_id}")
            entry = self._entry(stream_id)
            if self._readers.get(stream_id):
                raise ValueError(f"stream {stream_id} is open for reading ({self._readers[stream_id]} readers); "
                                 f"close them before destroying it")
            # Walk first (reads only), then unpublish, then free: an I/O error at any step leaves the
            # stream either fully there or fully gone, and never frees blocks that the table still names.
            extents = []
            chain.walk(self._state.engine, self._state.sb, [(stream_id, entry)],
                       lambda sid, index, start, used, t: extents.append((start, used)))
            self._publish(stream_id, 0)
            for start, used in extents:
                self._state.pool.free(start, used)

    def read_and_destroy_stream(self, stream_id: int) -> OpenStream:
        """Opens the stream for one consuming read: it leaves the table at once (durably), and each sblock's
        blocks return to the free pool as soon as the reader has moved past it."""
        self._this_process()
        with self._lock:
            self._check_writable(f"read and destroy stream {stream_id}")
            entry = self._entry(stream_id)
            if self._readers.get(stream_id):
                raise ValueError(f"stream {stream_id} is open for reading; close it before read_and_destroy")
            slots = self._state.buffers.take(self.prefetch_depth, 1, f"reader of stream {stream_id}")
            self._publish(stream_id, 0)
            r = StreamReader(self._state, stream_id, entry, slots, destroy=True)
            self._readers[stream_id] = 1
            self._state.consumers.add(r)
            sd = OpenStream(self, stream_id, "r", r)
            self._reader_handles.add(sd)
            return sd

    @property
    def engine(self):
        """The store's device set as a gpuio Target (its stats; raw reads of the store's blocks in benchmarks)."""
        self._this_process()
        return self._state.engine

    def stream_blocks(self, stream_id: int) -> list[tuple[int, int]]:
        """(first block, blocks used) of each sblock of a closed stream, in order, each trailer checked.
        KeyError when the store holds no such stream."""
        self._this_process()
        with self._lock:
            if stream_id not in self:
                raise KeyError(f"stream {stream_id} is not in the store")
            return list(self._state.chain_from(stream_id, *entry_unpack(self._state.table.entries[stream_id]), 0))

    def streams(self) -> list[int]:
        """Ids of the closed (published) streams (a read-only store: as of its last table read, see refresh())."""
        self._this_process()
        with self._lock:
            return [int(i) for i in self._state.table.live_ids()]

    def __contains__(self, stream_id) -> bool:
        self._this_process()
        with self._lock:
            return bool(isinstance(stream_id, (int, np.integer)) and 0 <= stream_id < self._state.sb.streams_max and
                        self._state.table.entries[stream_id] != 0)

    # -- maintenance ------------------------------------------------------------------------------------
    def check(self) -> dict:
        """Verifies the on-disk table equals memory, every chain is intact, no block belongs to two sblocks,
        and the free pool is exactly the complement of the used blocks. Raises StreamStoreCorrupt naming the
        first problem; returns counts. A read-only store reads the table and walks the chains again first (the
        writer's published streams since, not its streams being written)."""
        from .check import check_store
        self._this_process()
        with self._lock:
            self._check_open()
            if not self.writable:
                self._state.table = self._state.load_table()
                self._state.pool = self._state.walk_pool()
            return check_store(self._state)

    def __repr__(self) -> str:
        with self._lock:
            if self._state.engine.closed:
                return f"gpuio.streams.StreamStore({self.paths!r}, closed)"
            return (f"gpuio.streams.StreamStore({self.paths!r}, streams={len(self._state.table.live_ids())}, "
                    f"writers_open={len(self._state.writers)}, readers_open={sum(self._readers.values())}, "
                    f"free_blocks={self._state.pool.free_blocks}/{self._state.sb.total_blocks}, "
                    f"sblock_bytes={self.sblock_bytes}, block_size={self.block_size})")

    def stats(self) -> dict:
        """Streams, open writers and readers, free and total blocks, buffer slots (free, all, pinned for CUDA),
        whether this process is the store's writer, and the engine's stats."""
        self._this_process()
        with self._lock:
            return {"streams": len(self._state.table.live_ids()), "writable": self.writable,
                    "writers_open": len(self._state.writers),
                    "readers_open": sum(self._readers.values()), "free_blocks": self._state.pool.free_blocks,
                    "total_blocks": self._state.sb.total_blocks, "buffer_slots_free": self._state.buffers.free_slots,
                    "buffer_slots": self._state.buffers.slots_max,
                    "buffer_pinned_for_cuda": self._state.buffers.pinned, "engine": self._state.engine.stats()}

    def close(self) -> None:
        """Closes readers, drops writers that were never closed (their streams do not exist), closes the device set
        (an engine of its own stops). Idempotent. In a forked child that never used the store, only forgets it
        (the parent's engine holds it)."""
        if self._fork_gen != fork_generation():
            self._closed = True
            self._finalizer.detach()
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._finalizer.detach()
            for sd in list(self._state.writers.values()):
                self._drop_writer(sd)
            self._state.engine.close()
            self._state.buffers.unpin()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- internals --------------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True after close()."""
        return self._closed or self._state.engine.closed

    def _check_open(self) -> None:
        if self._closed or self._state.engine.closed:
            raise ValueError("stream store is closed")

    def _check_writable(self, verb: str) -> None:
        self._check_open()
        if not self.writable:
            raise ValueError(f"cannot {verb}: stream store {devices.names(self.paths)} is open read-only here "
                             f"({self._read_only_why}); write through the store of the process that holds the "
                             f"writer lock, or open it with mode='r+' once that one is closed")

    def _entry(self, stream_id) -> int:
        self._check_open()
        if not isinstance(stream_id, (int, np.integer)) or isinstance(stream_id, bool):
            raise TypeError(f"stream id must be an int, got {stream_id!r}")
        if stream_id in self._state.writers:
            raise ValueError(f"stream {stream_id} is still being written; close it before reading or destroying")
        if not 0 <= stream_id < self._state.sb.streams_max or self._state.table.entries[stream_id] == 0:
            raise KeyError(f"no stream {stream_id} in this store (never closed, destroyed, or unknown)")
        return int(self._state.table.entries[stream_id])

    def _handle(self, sd, mode: str, verb: str):
        self._check_open()
        if not isinstance(sd, OpenStream) or sd._store is not self:
            raise ValueError(f"{sd!r} is not a stream handle of this store")
        if sd._io is None:
            raise ValueError(f"cannot {verb} stream {sd.stream_id}: its handle is closed")
        if isinstance(sd._io, travel.Inherited):
            raise ValueError(sd._io.refusal(verb, sd.stream_id))
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
                for start, used in list(self._state.chain_from(sd.stream_id, *rest)):
                    self._state.pool.free(start, used)
            self._state.consumers.discard(r)
        self._state.buffers.give(r.slots)
        n = self._readers[sd.stream_id] - 1
        if n:
            self._readers[sd.stream_id] = n
        else:
            del self._readers[sd.stream_id]
        sd._io = None

    def _drop_writer(self, sd: OpenStream) -> None:
        w = sd._io
        if w is None:
            return
        w.abort()
        self._state.buffers.give(w.slots)
        self._state.writers.pop(sd.stream_id, None)
        sd._io = None

    def _publish(self, stream_id: int, entry: int) -> None:
        """Sets a table entry and writes its page (shadow slot), then syncs: durable when this returns."""
        t = self._state.table
        page = t.page_of(stream_id)
        old = t.entries[stream_id]
        t.entries[stream_id] = entry
        try:
            block, slot, seq = t.image(page, self._state.meta_buf[:self.block_bytes])
            self._state.engine.write(np.array([block], dtype=np.int64), self._state.meta_buf[:self.block_bytes])
            self._state.sync_data()
        except BaseException:
            t.entries[stream_id] = old
            raise
        t.committed(page, slot, seq)


__all__ = ["DEFAULTS", "MODES", "OpenStream", "StreamStore"]
