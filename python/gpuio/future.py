"""`gpuio.Future`: what every asynchronous call of gpuio returns.

    f = engine.read_async(blocks, out)     # also Target.read_async/write_async, TensorFile.prefetch,
    ...                                    # TableCache.submit/prefetch, the GPU path's stream-ordered calls
    out = f.wait()                         # blocks (bounded), returns the result or raises the call's error

- `done()` polls: True once the work is complete (failed included); never raises, never blocks.
- `wait(timeout=None)` blocks until the work is complete and returns its result, or raises its error. timeout
  in seconds; None is the work's own bound, never an infinite wait (an engine batch: the engine's
  io_timeout_ms; a stream-ordered GPU request: the GPU option wait_timeout_s). When the time runs out it raises
  TimeoutError (an OSError with errno ETIMEDOUT) naming what it waited on, and the future stays pending: a
  later wait() may still succeed. The result is computed once: every wait() returns the same object; a failed
  call raises the same exception object at every wait() (and exception() returns it).
- `result(timeout=None)` is wait() under concurrent.futures' name (the same bound, the same errors), for code
  written against that API; `exception(timeout=None)` waits likewise and returns the error instead of raising
  it (None after success).
- `event`: for stream-ordered GPU work, a torch.cuda.Event other CUDA streams can wait on (made on first use);
  None for work the host completes.

Thread safety: any number of threads may poll and wait on one future; a result that needs a last step (a
gather's cut out of the blocks read) is computed by one of them, under the future's lock.

A future is made over a `Work` (the engine's C++ batch, a GPU stream event, several futures: `Future.all_of`),
or already complete (`Future.completed`, `Future.failed`).
"""
from __future__ import annotations

import _thread
import errno
import math
import threading
import time
import warnings
from typing import Any, Callable, Iterable, Protocol

__all__ = ["Future", "Work"]

_PENDING, _DONE, _FAILED = 0, 1, 2


class Work(Protocol):
    """What a Future waits on (the engine's C++ batch handle, a GPU stream event, a list of futures)."""

    def poll(self) -> bool:
        """True once the work is complete, failed included (never raises, never blocks)."""
        ...

    def block(self, timeout: float | None) -> None:
        """Return once the work is complete; raise its error if it failed. timeout: seconds (None: the work's
        own bound); when it runs out, OSError(ETIMEDOUT) naming the work, which stays pending."""
        ...


class Future:
    """The result of an asynchronous gpuio call (see the module docstring): done(), wait(timeout),
    result(timeout), exception(timeout), event."""

    # No per-call lock, tuple or closure on the engine's path: a one-block read's latency is microseconds.
    __slots__ = ("_work", "_state", "_value", "_finish", "_lock", "_event")

    def __init__(self, work: Work, result: Any = None, finish: Callable[[], Any] | None = None,
                 event: Callable[[], Any] | None = None):
        """work: what to wait on. result: what wait() returns once it is complete, or finish: called once then
        (under the future's lock) to make the result; an error it raises is the future's. event: makes the
        torch.cuda.Event of stream-ordered work (called on first use of .event)."""
        self._work: Work | None = work
        self._state = _PENDING
        self._value: Any = result
        self._finish: Callable[[], Any] | None = finish
        self._lock: _thread.LockType | None = None if finish is None else threading.Lock()
        self._event: Callable[[], Any] | None = event

    @classmethod
    def completed(cls, result: Any = None) -> "Future":
        """A future of work already done (a synchronous path's answer to an asynchronous call)."""
        f = cls.__new__(cls)
        f._work, f._state, f._value, f._finish, f._lock, f._event = None, _DONE, result, None, None, None
        return f

    @classmethod
    def failed(cls, error: BaseException) -> "Future":
        """A future whose wait() raises error."""
        if not isinstance(error, BaseException):
            raise TypeError(f"error must be an exception, got {type(error).__name__}")
        f = cls.completed()
        f._state, f._value = _FAILED, error
        return f

    @classmethod
    def all_of(cls, futures: Iterable["Future"], finish: Callable[[], Any] | None = None) -> "Future":
        """A future of several: done once every one is; wait() waits for them in order (timeout bounds the
        whole wait) and raises the first error, else returns finish() (without finish: their results, a
        list)."""
        futures = list(futures)
        for i, f in enumerate(futures):
            if not isinstance(f, Future):
                raise TypeError(f"futures[{i}] must be a gpuio.Future, got {type(f).__name__}")
        if finish is None:
            finish = lambda: [f.wait() for f in futures]  # noqa: E731 - each one complete: no wait left
        return cls(_AllOf(futures), finish=finish)

    @property
    def work(self) -> Work | None:
        """What the future waits on (Engine.wait_any reads the engine batches); None for a future made complete, or
        once a result made by a last step is there (what it waited on is let go then)."""
        return self._work

    def done(self) -> bool:
        """True once the work is complete (failed included): wait() then returns at once. Never raises."""
        if self._state:
            return True
        work = self._work
        return work is None or work.poll()

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the work is complete (at most timeout seconds; None: the work's own bound) and return
        the result, or raise the call's error. TimeoutError (OSError ETIMEDOUT) when the time runs out."""
        if not self._state:
            self._settle(timeout)
        if self._state == _DONE:
            return self._value
        raise self._value

    def result(self, timeout: float | None = None) -> Any:
        """wait() under concurrent.futures' name: the result, or the call's error raised."""
        return self.wait(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """Wait as wait() does, then return the call's error (None if it succeeded) instead of raising it."""
        if not self._state:
            try:
                self._settle(timeout)
            except BaseException:  # noqa: BLE001 - a failed call is settled; a timeout is not
                if not self._state:
                    raise
        return self._value if self._state == _FAILED else None

    @property
    def event(self) -> Any:
        """A torch.cuda.Event that completes with stream-ordered work (other streams can wait on it); None for
        work the host completes."""
        return None if self._event is None else self._event()

    def _settle(self, timeout: float | None) -> None:
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout >= 0):
            raise ValueError(f"timeout must be None or a number of seconds >= 0, got {timeout!r}")
        work = self._work
        if work is None:  # another thread settled it
            return
        try:
            work.block(timeout)
        except Exception as e:
            if not self._state and work.poll():  # the work failed (a wait that ran out leaves it pending)
                self._fail(e)
            raise
        if self._lock is None:  # the work stays: an engine batch's, for Engine.wait_any
            self._state = _DONE
            return
        with self._lock:
            if self._state or self._finish is None:
                return
            try:
                value = self._finish()
            except Exception as e:
                self._fail(e)
                raise
            self._value, self._state, self._work, self._finish = value, _DONE, None, None

    def _fail(self, error: BaseException) -> None:
        self._value, self._state, self._finish = error, _FAILED, None

    def __repr__(self) -> str:
        state = ("failed: " + type(self._value).__name__ if self._state == _FAILED else
                 "done" if self._state == _DONE else "pending")
        return f"<gpuio.Future {state}>"


class _AllOf:
    """Work of several futures (Future.all_of)."""
    __slots__ = ("futures",)

    def __init__(self, futures: list):
        self.futures = futures

    def poll(self) -> bool:
        return all(f.done() for f in self.futures)

    def block(self, timeout: float | None) -> None:
        end = None if timeout is None else time.monotonic() + timeout
        for f in self.futures:
            f.wait(None if end is None else max(0.0, end - time.monotonic()))


class Polled:
    """Work that offers only a non-blocking check (a thread pool's future, KvikIO's futures): block() polls it,
    napping from 50 us up to 1 ms, until done or the bound. check() raises the work's error once it is done."""
    __slots__ = ("_is_done", "_check", "_bound_s", "_what")

    def __init__(self, is_done: Callable[[], bool], check: Callable[[], None], bound_s: float, what: str):
        if not (bound_s > 0 and math.isfinite(bound_s)):
            raise ValueError(f"bound_s must be a finite number of seconds > 0, got {bound_s!r}")
        self._is_done, self._check, self._bound_s, self._what = is_done, check, bound_s, what

    def poll(self) -> bool:
        return bool(self._is_done())

    def block(self, timeout: float | None) -> None:
        limit = self._bound_s if timeout is None else timeout
        end, nap = time.monotonic() + limit, 50e-6
        while not self._is_done():
            if time.monotonic() >= end:
                raise OSError(errno.ETIMEDOUT, f"{self._what} not complete after {limit:g} s")
            time.sleep(nap)
            nap = min(nap * 2, 1e-3)
        self._check()


def deprecated_alias(old: str) -> type:
    """Future, with a DeprecationWarning naming `old` (a future type gpuio had before gpuio.Future): for the
    modules' __getattr__ that keep the old names importable for one release."""
    warnings.warn(f"{old} is deprecated: every asynchronous gpuio call returns a gpuio.Future (done, wait, result)",
                  DeprecationWarning, stacklevel=3)
    return Future
