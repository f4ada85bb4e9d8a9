"""Objects that hold a process's engine targets, locks or threads, across fork(): the child reopens them on first use.

A forked child inherits gpuio objects but none of the threads behind them (engine workers, the GPU control plane),
and a lock a parent thread held at the fork stays held forever in the child. An object that holds such things
derives from `ForkAware`: it calls `_opened_here()` when it opens them, and `_this_process()` at the start of every
public call (before taking a lock of its own). In a forked child the first such call runs the object's
`_after_fork()` once, under a lock made anew in each child: there it reopens its files on the child's own engine
(gpuio.default_engine()) and makes fresh locks. Nothing of the parent's is closed, joined or waited on: the parent
still owns it.
"""
from __future__ import annotations

import os
import threading

from gpuio.engine import Engine, fork_generation

# Re-entrant: reopening an object may reopen the objects it holds (a table cache's TensorFile).
_reopen_lock = threading.RLock()


def _after_fork_in_child() -> None:
    global _reopen_lock
    _reopen_lock = threading.RLock()  # a parent thread may have held it at the fork


os.register_at_fork(after_in_child=_after_fork_in_child)


class ForkAware:
    """Mixin: reopen in a forked child on first use (see the module docstring)."""

    _fork_gen = 0

    def _opened_here(self) -> None:
        """Record that what the object holds belongs to this process."""
        self._fork_gen = fork_generation()

    def _this_process(self) -> None:
        """In a forked child, run _after_fork() once (the first caller does; the others wait for it)."""
        if self._fork_gen == fork_generation():
            return
        with _reopen_lock:
            if self._fork_gen != fork_generation():
                self._after_fork()
                self._fork_gen = fork_generation()

    def _after_fork(self) -> None:
        raise NotImplementedError


def options_here(options: dict) -> dict:
    """`options` without an `engine` that belongs to another process (an Engine inherited through fork has none of
    its threads here): the file then opens on this process's engine, as a pickled object's does."""
    eng = options.get("engine")
    if isinstance(eng, Engine) and eng.inherited:
        options = {k: v for k, v in options.items() if k != "engine"}
    return options
