"""A StreamStore in other processes: pickled (spawn/forkserver DataLoader workers, torch.multiprocessing ranks) and
inherited through fork.

The rule, for both: the store reopens in the receiving process from its paths and options, never formatting. It is
the writer there ("r+", with the exclusive lock) only when that process gets the writer lock at once; else it is
read-only and takes no lock (mode "r"): the sender, or another process, holds the lock and stays the one writer.
A store opened with lock=False arrives read-only too (without a lock nothing says it is the only writer), and so
does a read-only one. A forked child always finds its parent's lock held (the child's inherited descriptor shares
it), so an inherited store is read-only in the child while the parent has it open. `store.writable` says which
happened; a write through a read-only store is refused in one line saying why.

Streams: a reader travels as its stream id and position (the receiver opens a reader of its own there; in a fork,
an inherited reader goes on from where it was, on the child's engine). A stream open for writing does not travel:
in a forked child a write through an inherited writer is refused (the parent is still writing that stream, and
its blocks and buffers are the parent's); closing it there only drops the handle. A consuming reader
(read_and_destroy_stream) frees blocks as it goes: it does not travel either.
"""
from __future__ import annotations

import errno
import os
from typing import Any, Protocol, cast

from .reader import StreamReader
from .state import StoreState


class Inherited:
    """In a forked child: the stand-in for a writer or consuming reader that belongs to the parent."""

    slots: list = []

    def __init__(self, what: str, pid: int):
        self.what, self.pid = what, pid

    def refusal(self, verb: str, stream_id: int) -> str:
        return (f"cannot {verb} stream {stream_id}: it is {self.what} of process {self.pid}, and this process "
                f"({os.getpid()}) is a fork of it; finish it in process {self.pid} (a closed stream reads anywhere), "
                f"or open a store in this process")

    def abort(self) -> None:
        """Nothing to undo here: the stream is the parent's."""


class _Store(Protocol):
    """What Travelling's methods use of the StreamStore they are mixed into (its self type)."""
    paths: list
    writable: bool
    _settings: dict
    _engine_options: dict
    _closed: bool
    _pid: int
    _state: StoreState
    _reader_handles: Any
    _lock: Any

    def _open(self, paths: list, writable: bool, fresh: bool = False, streams_max: int = 0,
              lock_wait_ms: int | None = None, read_only_why: str = ...) -> None: ...

    def _open_reader(self, stream_id: int, at: Any = None) -> Any: ...

    def _open_received(self, paths: list, writable: bool) -> None: ...

    def _this_process(self) -> None: ...

    def _reader_at(self, stream_id: int, position: Any) -> Any: ...


class Travelling:
    """StreamStore's half that crosses processes, by the module's rule: a mixin of StreamStore, so these methods
    work on the store's own fields as its other methods do."""

    @classmethod
    def _arrive(cls, paths: list, settings: dict, engine_options: dict, writable: bool):
        """Unpickle a StreamStore: reopen it here by the module's rule."""
        store = cast(_Store, cls.__new__(cls))
        store._settings, store._engine_options = dict(settings), dict(engine_options)
        store._open_received(list(paths), writable)
        return store

    def _open_received(self: _Store, paths: list, writable: bool) -> None:
        """Open this store (settings and engine options already set) in this process by the module's rule."""
        if writable and self._engine_options.get("lock", True):
            try:
                self._open(paths, writable=True, lock_wait_ms=0)
                return
            except OSError as e:
                if e.errno != errno.EWOULDBLOCK:
                    raise
            why = "its writer lock is held elsewhere: by the store it was sent from or forked with, say"
        elif writable:
            why = "it came from another process and has no lock (lock=False) to make this one its only writer"
        else:
            why = "it was opened with mode='r'"
        self._open(paths, writable=False, read_only_why=why)

    def _reopen_in_child(self: _Store) -> None:
        """A forked child's first call on an inherited store: reopen it, carry inherited readers over at their
        positions, leave inherited writers and consuming readers refusing."""
        if self._closed:
            return
        parent = self._pid
        writers = list(self._state.writers.values())
        readers = [(sd, sd.io) for sd in list(self._reader_handles) if sd.io is not None]
        self._open_received(self.paths, self.writable)
        for sd in writers:
            sd.io = Inherited("being written by the writer", parent)
        for sd, old in readers:
            if isinstance(old, StreamReader) and not old.destroy:
                fresh = self._open_reader(sd.stream_id, old.position())
                sd.io = fresh.io
                self._reader_handles.add(sd)
                fresh.io = None
            else:
                sd.io = Inherited("consumed (read_and_destroy_stream) by a reader", parent)

    def _reduce_reader(self: _Store, sd) -> tuple:
        """OpenStream.__reduce__: a reader as this store's _reader_at(stream id, position)."""
        self._this_process()
        with self._lock:
            io = sd.io
            if io is None:
                raise TypeError(f"stream {sd.stream_id}'s handle is closed: send the store and the stream id instead")
            if sd.mode != "r" or not isinstance(io, StreamReader) or io.destroy:
                what = "open for writing" if sd.mode == "w" else "being consumed (read_and_destroy_stream)"
                raise TypeError(f"stream {sd.stream_id} is {what} and does not travel to another process: close it "
                                f"first (a closed stream opens for reading anywhere)")
            return (self._reader_at, (sd.stream_id, io.position()))

    def _reader_at(self: _Store, stream_id: int, position):
        """Unpickle an OpenStream reader: a reader of this process's store at the sender's position."""
        self._this_process()
        with self._lock:
            return self._open_reader(stream_id, position)

__all__ = ["Inherited", "Travelling"]
