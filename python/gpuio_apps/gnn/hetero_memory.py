"""Memory of the hetero job's runs (gpuio_apps.gnn.hetero_job): the limit the out-of-core runs get, what a run's
cgroup held, and what a run leaves behind that the next must not inherit (page cache, pinned host memory).

Out of core means out of memory (docs/BENCHMARKS.md). With `memory_fraction` F > 0, one process and no
memory limit on the process yet, the job's runs run inside a memory cgroup of their own (gpuio_apps.bench.memlimit:
v2 or v1; root), and the gpuio and mmap runs are given F x the feature tables of memory (at least
2 x HEADROOM_BYTES) — G, as `gpuio demo` gives its own:
- mmap, the baseline, runs under a limit set when its steps start (`ready`): the group's usage then (its
  structure, model, loader), plus what a run's steps add on top (`growth`: measured on the in-memory run, the
  reference, which runs first and unlimited; else on a warm-up on zero features), plus G — its page cache;
  from then on the limit follows its anonymous memory (every FOLLOW_S: anonymous now + G);
- gpuio reads with O_DIRECT, past the page cache; its feature data in memory is its host tiers (the host
  buffer; on the CPU, where it is host memory, its device cache too), sized to 80 % of what G leaves beside
  HEADROOM_BYTES and gpuio's working memory (engine buffers, measured in the group). It runs in the same group,
  counted (its page cache and peak are reported), not capped: its other memory (read buffers) follows the C
  allocator's habits, and a cap sized for them would be a guess that kills the demo when wrong.
A process already under a limit (a cgroup it was started in, as `scripts/gpu.sh hetero` does) keeps that limit;
under torchrun every rank stays in the group it was started in.
"""
from __future__ import annotations

import ctypes
import gc
import os
import threading

import torch

from gpuio_apps.bench.memlimit import V1_ROOT, V2_ROOT, MemoryLimit

HEADROOM_BYTES = 16 << 20  # of the memory given: what a run's steps may add beyond the measured growth
TIERS_SHARE = 0.8  # of the memory given less the headroom and gpuio's working memory: its host tiers
FOLLOW_S = 0.02  # how often mmap's limit follows its anonymous memory


def cgroup_memory() -> dict | None:
    """This process's memory cgroup as the run sees it: limit (None: unlimited; the smallest of the group's and
    its parents'), peak so far, anonymous memory and page cache now, in bytes; None where the process is in no
    group with a memory controller."""
    g = MemoryLimit.current()
    if g is None:
        return None
    try:
        return dict(limit=g.effective_limit_bytes(), peak=g.peak_bytes(), anon=g.anon_bytes(), file=g.cache_bytes(),
                    group=os.path.relpath(g.path, V2_ROOT if g.version == 2 else V1_ROOT))
    except (OSError, ValueError, KeyError):
        return None


def evict_page_cache(root: str) -> int:
    """Drop every file under `root` from the page cache (fdatasync, then posix_fadvise DONTNEED: no root
    needed), so a run does not read what the generator or the previous run left cached. Returns the files."""
    n = 0
    for folder, _, names in os.walk(root):
        for name in names:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                n += 1
            finally:
                os.close(fd)
    return n


def _malloc_trim() -> None:
    """Hand the C allocator's free pages back to the kernel (glibc keeps them in its per-thread arenas: seen
    here, 46 -> 92 -> 113 MiB left charged to the cgroup after three warm-ups with no object alive)."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def release_memory() -> None:
    """Free what earlier runs left: objects, the C allocator's free pages (_malloc_trim), cached GPU blocks, and
    cached pinned host blocks (torch keeps freed pinned memory for reuse; in a memory cgroup it would shrink the
    next run's page cache)."""
    gc.collect()
    _malloc_trim()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        empty_host = (getattr(getattr(torch, "accelerator", None), "empty_host_cache", None)
                      or getattr(torch._C, "_host_emptyCache", None))  # the older name
        if empty_host is not None:
            empty_host()


class RunMemory:
    """The memory the limited (gpuio, mmap) runs get; see the module docstring. mode: "own" (a cgroup of the
    job's own, made by `enter`), "outer" (the limit the process was started under) or "none" (`why` says why).
    runs: per limited run, its limit and the usage its steps started from."""

    def __init__(self, fraction: float, feature_bytes: int, world: int = 1):
        self.fraction, self.feature_bytes = fraction, feature_bytes
        self.given = max(int(fraction * feature_bytes), 2 * HEADROOM_BYTES)
        self.raised = self.given > fraction * feature_bytes  # a table too small for the headroom
        self.working, self.growth, self.runs, self.growth_by = 0, None, {}, ""
        self.lim, self.why, self.version, self._start = None, "", 0, 0
        self._follower, self._stop = None, None
        current = MemoryLimit.current()
        self.outer = current.effective_limit_bytes() if current is not None else None
        # A limit the process was started under counts only where it keeps the features out of core: a machine's
        # own group (the GPU machine's 128 GiB) or a generous one leaves the job to make its own.
        if self.outer is not None and self.outer >= feature_bytes:
            self.outer = None
        if self.outer is not None:
            self.mode = "outer"
        elif fraction <= 0:
            self.mode, self.why = "none", "--memory-fraction 0"
        elif world > 1:
            self.mode, self.why = "none", "under torchrun each rank stays in the cgroup it was started in"
        else:
            self.mode = "own"

    def enter(self, working_bytes, warm_up=None) -> None:
        """Into a fresh memory cgroup, no limit yet; working_bytes(usage) -> gpuio's working memory (usage: () ->
        the group's bytes now); warm_up(ready), where no in-memory run will measure `growth`: a warm-up that
        calls ready() as its steps start, measured instead. Where no group can be made the runs go on without
        (mode "none", `why` says so)."""
        self.lim = MemoryLimit.enter("gpuio-hetero")
        if self.lim is None:
            self.mode, self.why = "none", f"{MemoryLimit.why}; run as root for one"
            return
        self.version = self.lim.version
        self.working = working_bytes(self.lim.usage_bytes)
        if warm_up is not None:
            warm_up(lambda: self.ready("warm-up"))
            self.finished("warm-up")

    def ready(self, backend: str, tiers: int = 0) -> None:
        """A run's steps start (its stores, structure and model are built; `tiers`: bytes of gpuio's host tiers
        among them): a limited run (gpuio, mmap) gets its limit; another (in-memory features, the warm-up)
        is measured, unlimited, for `growth`."""
        if self.lim is None:
            return
        now = self.lim.usage_bytes()
        try:
            self.lim.reset_peak()
        except OSError:  # a v2 kernel before 6.12: the group's peak since it was made (the measured run came first)
            pass
        if backend == "mmap":  # from the estimate first, then following its anonymous memory (_follow)
            limit = now + (self.growth or 0) + self.given
            self.lim.set(limit)
        elif backend == "gpuio":
            limit = None  # counted, not capped (see the module docstring)
        else:
            self._start = now
            return
        self.runs[backend] = run = dict(limit=limit, start=now, tiers=tiers, cache_max=0)
        if limit is not None:
            self._stop = threading.Event()
            self._follower = threading.Thread(target=self._follow, args=(run, self._stop), daemon=True,
                                              name="gpuio-memlimit")
            self._follower.start()

    def step(self, backend: str) -> None:
        """A step of a run ended: records the page cache it holds."""
        run = self.runs.get(backend)
        if self.lim is not None and run is not None:
            run["cache_max"] = max(run["cache_max"], self.lim.cache_bytes())

    def _follow(self, run: dict, stop: threading.Event) -> None:
        """mmap's limit follows its anonymous memory, every FOLLOW_S: anonymous now + the memory given, so its page
        cache holds the memory given whatever its own memory does (the growth measured on another run is an
        estimate: on the 2-core box mmap's page cache reached 58 MiB of 33 given with it alone)."""
        while not stop.wait(FOLLOW_S):
            try:
                run["limit"] = self.lim.anon_bytes() + self.given
                self.lim.set(run["limit"])
            except (OSError, ValueError, KeyError):  # v1: EBUSY while the page cache cannot shrink yet; next time
                pass

    def finished(self, backend: str) -> dict | None:
        """A run's steps ended: its figures (as cgroup_memory's: limit, peak since its steps started, anonymous
        memory and page cache now) for a limited run, else None; then the limit goes (evaluation and the next
        run's set-up happen unlimited). A measured run's peak gives `growth` when none is known yet."""
        if self.lim is None:
            return cgroup_memory() if self.mode == "outer" and backend in ("gpuio", "mmap") else None
        if self._follower is not None:
            self._stop.set()
            self._follower.join()
            self._follower = None
        out = None
        if backend in self.runs:
            run = self.runs[backend]
            out = dict(limit=run["limit"], peak=self.lim.peak_bytes(), anon=self.lim.anon_bytes(),
                       file=self.lim.cache_bytes(), file_max=max(run["cache_max"], self.lim.cache_bytes()),
                       group=os.path.basename(self.lim.path))
        elif self.growth is None:
            self.growth = max((self.lim.peak_bytes() or 0) - self._start, 0)
            self.growth_by = "warm-up on zero features" if backend == "warm-up" else "in-memory run"
        self.lim.unset()
        return out

    def leave(self) -> None:
        if self._follower is not None:  # a run cut short (SIGTERM) did not finish
            self._stop.set()
            self._follower.join()
            self._follower = None
        if self.lim is not None:
            self.lim.leave()
            self.lim = None

    def tiers_bytes(self) -> int | None:
        """Host memory gpuio's cache tiers may fill inside the memory given; None without a limit of its own."""
        if self.mode != "own" or not self.version:
            return None
        return max(0, int(TIERS_SHARE * (self.given - HEADROOM_BYTES - self.working)))

    def times_larger(self) -> float | None:
        """How many times the features exceed the memory the limited runs were given; None: no limit."""
        if self.mode == "own" and self.version:
            return self.feature_bytes / max(self.given, 1)
        if self.mode == "outer":
            return self.feature_bytes / max(self.outer, 1)
        return None

    def describe(self) -> str:
        """The `memory given:` line (after `enter`)."""
        mib = (lambda b: f"{b / 2**20:,.0f} MiB")
        feats = f"features {mib(self.feature_bytes)}"
        if self.mode == "own" and self.version:
            over = (f"; its working memory alone is {mib(self.working - self.given)} over them: no cache tiers"
                    if self.working > self.given else "")
            return (f"memory given: {mib(self.given)} to the gpuio and mmap runs, {feats} ({self.times_larger():.1f}x "
                    f"larger{'; raised to twice the headroom' if self.raised else ''}), a cgroup v{self.version} of "
                    f"their own. mmap: its page cache (a limit of its own memory, followed as it changes, + those "
                    f"{mib(self.given)}). gpuio: reads with O_DIRECT, past the page cache; its host tiers "
                    f"({mib(self.tiers_bytes() or 0)}) and working memory ({mib(self.working)}: engine buffers) count "
                    f"in those {mib(self.given)}{over}; counted, not capped")
        if self.mode == "outer":
            return (f"memory given: the cgroup this process runs in, limit {self.outer / 2**30:.1f} GiB (anonymous "
                    f"memory and page cache together); {feats}, {self.times_larger():.1f}x the limit")
        return (f"memory given: NO limit ({self.why}): the page cache may hold the features, so mmap may read them "
                f"from memory; {feats}")


def gpuio_working_bytes(ds, cfg, usage) -> int:
    """Memory gpuio's stores take beyond their cache tiers (engines and their buffers, bookkeeping): usage()
    (the cgroup's bytes now) before and after opening a tier-less store per type and reading rows through it."""
    from gpuio.cache import TableCache
    from gpuio.tensor import TensorFile
    release_memory()  # what the warm-up left is gone before the count starts
    before = usage()
    stores = [TableCache(TensorFile.open(ds.feature_path(nt)), gpu_cache_bytes=0, window=cfg.window,
                           device=cfg.device) for nt in ds.node_types]
    for st in stores:
        st.gather(torch.arange(min(cfg.batch_size, st.num_rows), device=cfg.device))
    working = usage() - before
    for st in stores:
        st.tf.close()
    del stores
    release_memory()
    return max(working, 0)
