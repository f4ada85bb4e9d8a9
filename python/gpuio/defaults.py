"""gpuio.defaults: every knob of the library in one table: its default, range or choices, environment variable and
what it does (KvikIO's `defaults`, for gpuio's several objects).

    gpuio.defaults.get("workers")                  # the value in force: set() > GPUIO_WORKERS > the default
    gpuio.defaults.set("io_timeout_ms", 5000)      # checked by the knob's own check (C++'s for C++ knobs)
    with gpuio.defaults.set({"queue_depth": 64, "gpu.bounce_bytes": 128 << 20}):
        ...                                         # the previous values come back on leaving the block
    gpuio.defaults.knobs()                          # the rows; `gpuio defaults` prints them

Names: the engine's knobs are gpuio.Engine's keywords (block_size, workers, ...); every other knob is
"<owner>.<keyword>" (gpu.bounce_bytes, streams.sblock_bytes, cache.window, ...). Where C++ owns a knob (EngineOptions,
GpuOptions, the engine's sim/fault/rbd sections, limits.hpp's table policy, array_cache.hpp's DeviceArray defaults)
its default (and, for the option structs, range, choices and doc) is read from C++; the rest are declared here, once.
Modules that take a knob read its default from here (their signatures show it).

Process-wide settings: a knob with an environment variable (`env`, GPUIO_<NAME>) is one: get() gives set()'s value,
else the variable's, else the default, read when the object that uses it is made. The engine-wide engine knobs
configure the engines gpuio makes itself (the process engine, gpuio.default_engine(), and the engine open_files makes
for a file that needs one of its own); the gpu.* knobs every GPU path attached without options. An Engine made by
hand takes its keywords (defaults: this table's defaults). The other knobs are keywords of their owner only (a file's
direct/writable/lock, a StreamStore's sblock_bytes, ...): set() refuses them, naming where to pass them.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from . import _core

# owner -> what takes its knobs (the listing's headings)
OWNERS = {
    "engine": "gpuio.Engine(...) keywords; the per-file ones (per_target) also open_files/Engine.open_target's",
    "sim": "gpuio.Engine(backend='sim', sim=dict(...)); GPUIO_SIM='key=value,...' overrides them (C++)",
    "fault": "gpuio.Engine(backend='fault:<backend>', fault=dict(...))",
    "rbd": "gpuio.Engine(paths 'rbd:POOL/IMAGE', rbd=dict(...)); gpuio.volumes",
    "gpu": "Engine.attach_gpu(**options); engine.gpu (the GPU path made with no options) reads the settings",
    "table": "gpuio.TensorFile's own engine (a table whose engine options name none), from limits.hpp",
    "array": "gpuio.DeviceArray(...) keywords",
    "streams": "gpuio.streams.StreamStore(...) keywords",
    "cache": "gpuio.TableCache(...) keywords",
    "safetensors": "gpuio.safetensors' loader (load_file, safe_open) reads the settings",
    "volumes": "gpuio.volumes (create, open, map) keywords",
    "environment": "variables only, read where they act (no keyword; set them in the environment)",
}

# Where a knob that is no process-wide setting is given instead (when OWNERS' text does not say it).
_PASS_TO = {
    "engine": "a keyword of gpuio.Engine(...)",
    "sim": "a key of gpuio.Engine(sim=dict(...)) (or of GPUIO_SIM)",
    "fault": "a key of gpuio.Engine(fault=dict(...))",
    "rbd": "a key of gpuio.Engine(rbd=dict(...))",
    "table": "C++'s policy for a TensorFile's own engine (name workers= in its engine options instead)",
}


@dataclass(frozen=True)
class Knob:
    """One row of the table. `key` is the keyword its owner takes; `name` the table's name for it (key for the
    engine's, "<owner>.<key>" for the others); env is None for a knob that is a keyword only."""

    name: str
    owner: str
    key: str
    default: Any
    type: str                      # int | bool | str | float | dict
    doc: str
    min: Any = None                # numbers: inclusive range (None: none)
    max: Any = None
    choices: tuple = ()            # strings: the values allowed (empty: any)
    pow2: bool = False
    per_target: bool = False       # engine: a per-file choice
    env: str | None = None
    source: str = "C++"            # who owns the default: "C++" (read from _core) or "Python" (declared here)
    env_only: bool = False         # a variable with no keyword, read where it acts (owner "environment")

    @property
    def cli(self) -> str:
        """Its name as a command-line option (--block-size)."""
        return "--" + self.key.replace("_", "-")

    def range_text(self) -> str:
        if self.choices:
            return " | ".join(self.choices)
        if self.min is None and self.max is None:
            return ""
        if self.max is None:
            return f">= {_human(self.min)}"
        if self.min is None:
            return f"<= {_human(self.max)}"
        return ("power of two " if self.pow2 else "") + f"[{_human(self.min)}, {_human(self.max)}]"


def _human(v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and v >= 1 << 20 and v & ((1 << 10) - 1) == 0:
        for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
            if v % (1 << shift) == 0:
                return f"{v >> shift} {unit}"
    return repr(v)


# The Python-owned knobs: (owner, key, default, doc, extra). Defaults the modules restated before live here only.
_MiB = 1 << 20
_PYTHON_KNOBS: list[tuple[str, str, Any, str, dict]] = [
    ("gpu", "stream_wait", "auto", "stream-ordered wait: auto (wait_value where the start-up self-test saw "
     "cuStreamWaitValue32 release, else kernel) | kernel (a 1-thread poll kernel) | wait_value (no SM)",
     dict(choices=("auto", "kernel", "wait_value"))),
    ("gpu", "wait_timeout_s", 90.0, "bound in seconds of a stream-ordered request's Future.wait() (above the "
     "engine's io_timeout_ms, so an I/O failure reports itself first), then OSError(ETIMEDOUT) naming the request",
     dict(min=0.001)),
    ("array", "page_bytes", None, "cache page size: None: the store's block size, else a power of two of 1..16 "
     "blocks", {}),
    ("streams", "sblock_bytes", 4 * _MiB, "one sblock: the unit of chaining, allocation and read-ahead", {}),
    ("streams", "prefetch_depth", 4, "sblocks read ahead per open reader; writes in flight per writer (+1 filling)",
     dict(min=1)),
    ("streams", "buffer_pool_bytes", 64 * _MiB, "all open streams' buffers together", {}),
    ("streams", "mode", "r+", "r+: open an existing store, r: read-only, c: create when missing, w: format",
     dict(choices=("r+", "r", "c", "w"))),
    ("streams", "create_bytes", 1 << 30, "size of the file(s) that mode c/w creates (sparse), all devices together",
     {}),
    ("streams", "streams_max", 1 << 17, "stream ids in the table (fixed when the store is formatted)", {}),
    ("streams", "block_size", None, "engine block size (fixed when the store is formatted)", dict(like="block_size")),
    ("streams", "durable", True, "close/destroy return after an engine sync(); False: the OS decides", {}),
    ("streams", "checksum_payload", True, "CRC-32C of each sblock's payload, verified on read (metadata always has "
     "CRCs); cost vs read throughput: benchmarks/streams_bench.py", {}),
    ("cache", "gpu_cache_bytes", 256 * _MiB, "page-cache budget on the store's device; 0 disables the cache",
     dict(min=0)),
    ("cache", "host_cache_rows", 0, "rows in the constant host buffer, the highest of hot_scores", dict(min=0)),
    ("cache", "window", 8, "announced batches whose uses the cache's eviction and admission know", dict(min=0)),
    ("cache", "accumulate", True, "merge misses of micro-batches until inflight_pages_min pages are missing", {}),
    ("cache", "policy", "clock", "eviction policy of the page cache",
     dict(choices=("clock", "lru", "fifo", "random"))),
    ("cache", "inflight_pages_min", 256, "missing pages an accumulated group reads together (about 2 engine workers "
     "x QD128: the depth where 4 KiB random reads saturate)", dict(min=1)),
    ("safetensors", "chunk_mib", 16, "MiB of the file one plan reader call of a load reads (its destinations cut at "
     "multiples of it, rounded up to whole ring pieces)", dict(min=1, max=1024)),
    ("safetensors", "threads", 8, "plan reader calls of a load at once (each with its own io_uring queue and ring)",
     dict(min=1, max=64)),
    ("safetensors", "huge_slots", True, "page-locked slots of CUDA saves: True: gpuio's pool of slots in 2 MiB "
     "pages (gpuio._pinned: private anonymous mappings advised MADV_HUGEPAGE, registered with CUDA once per process "
     "and kept), so a 1 MiB O_DIRECT request is one segment; False: torch's pinned blocks in 4 KiB pages (256 "
     "segments, split where the disk takes fewer: 254 on virtio-blk); loads' rings always come from the plan "
     "reader's one pinned pool. 2-core VM, 4 GiB in 16 MiB engine reads: 3.4-3.8 GB/s into 2 MiB pages, 1.4-1.7 "
     "into 4 KiB ones", {}),
    ("safetensors", "ring_kib", 2048, "KiB of each plan reader call's ring of two page-locked pieces (whole 4 KiB "
     "blocks): bytes not in the page cache are read piece by piece, each copied to its destinations as it lands, "
     "so the disk's transfers go to threads x ring_kib of memory used over and over (H200 virtio disk: raw 128 KiB "
     "reads into a 4-8 MiB buffer ran 1.2 x the same into 16 MiB or more)", dict(min=8, max=1 << 20)),
    ("safetensors", "direct_kib", 256, "KiB of each O_DIRECT piece of a plan reader call whose bytes are not all "
     "in the page cache (whole 4 KiB blocks); 0: ring_kib / 2, the piece a call of resident bytes copies through. "
     "H200 virtio disk, 8.24 GiB cold, one round each, same run (66983f2): 256 KiB x 4 in flight 4.32 s (1.36 x "
     "fastsafetensors, 1.33 x the raw whole-file read), 512 x 4 5.41 s, 256 x 8 5.78 s, 1 MiB x 2 6.18 s; "
     "ring_kib=512 threads=16 5.18 s", dict(min=0, max=1 << 20)),
    ("safetensors", "direct_pieces", 4, "O_DIRECT pieces in flight in each plan reader call whose bytes are not "
     "all in the page cache (its ring holds that many pieces of direct_kib; see direct_kib)", dict(min=1, max=64)),
    ("safetensors", "pipeline", "cpp", "the data path of loads, reported as stats['pipeline']: cpp, the GPU layer's "
     "plan reader (gpuio/plan_reader.hpp), the only one; a setting of another (python, the Python reader threads "
     "that are gone; auto) fails naming the value", dict(choices=("cpp",))),
    ("safetensors", "copy_streams", 1, "CUDA streams of each plan reader call's copies to the device (piece k on "
     "stream k % copy_streams)", dict(min=1, max=64)),
    ("volumes", "pool", "rbd", "the Ceph pool volumes go to", {}),
    ("volumes", "namespace", "", "the pool namespace ('': the default one)", {}),
    ("volumes", "object_size", 4 * _MiB, "bytes per RADOS object (RBD's default order 22)", {}),
    ("volumes", "block_size", None, "engine block of open()", dict(like="block_size")),
    ("volumes", "timeout_s", 30, "connecting and mon commands fail with ETIMEDOUT after this, never hang", {}),
    ("volumes", "workers", 2, "engine workers of open(): librbd completes on its own threads, 2 keep up", {}),
]

# Variables with no keyword, read where they act (C++ or gpuio.gpu): (name, variable, doc).
_ENVIRONMENT = [
    ("sim", "GPUIO_SIM", "overrides sim.* keys of every sim backend when it opens (C++): 'preset=tlc,channels=1,...' "
     "(any subset); the backend's description reports the values in force"),
    ("uring_taskrun", "GPUIO_URING_TASKRUN", "'default': io_uring rings without SINGLE_ISSUER and DEFER_TASKRUN "
     "(C++, when a ring is made)"),
    ("rbd_library", "GPUIO_RBD_LIBRARY", "path of the rbd backend's plugin, libgpuio_rbd.so ('': the one beside "
     "gpuio._core; C++, read once per process)"),
    ("skip_stream_wait_selftest", "GPUIO_SKIP_STREAM_WAIT_SELFTEST", "non-empty: skip the cuStreamWaitValue32 "
     "self-test (gpu.stream_wait auto then waits by kernel)"),
]

_ARRAY_DOCS = {
    "cache_bytes": "page-cache capacity (rounded down to whole sets of pages)",
    "ways": "associativity (capped by the number of pages the cache holds)",
    "staging_groups": "GPU: host-mapped staging areas, one per warp filling at once",
    "round_bytes": "a warp fills at most this many bytes of pages per round (pinned staging = staging_groups x "
                   "round_bytes)",
}
_TABLE_DOCS = {
    "workers": "engine workers of a TensorFile whose engine options name none (limits.hpp's table_workers of this "
               "machine's CPUs)",
    "batch_blocks_max": "the most blocks one engine batch of a gather or scatter holds",
}
_SECTIONS = {"sim": "the flash simulator's options (backend 'sim')",
             "fault": "injected faults (backend 'fault:<backend>')",
             "rbd": "Ceph RBD options (backend 'rbd')"}


def _type_of(v: Any) -> str:
    return "float" if isinstance(v, float) else "bool" if isinstance(v, bool) else \
        "int" if isinstance(v, int) else "str" if isinstance(v, str) else "any"


def _build() -> dict[str, Knob]:
    rows: dict[str, Knob] = {}
    tables = _core.knob_tables()

    def add(k: Knob) -> None:
        assert k.name not in rows, k.name
        rows[k.name] = k

    for owner in ("engine", "gpu", "sim", "fault", "rbd"):
        for r in tables[owner]:
            key = r["name"]
            name = key if owner == "engine" else f"{owner}.{key}"
            settable = (owner == "engine" and not r["per_target"]) or owner == "gpu"
            add(Knob(name, owner, key, r["default"], r["type"], r["doc"], r["min"], r["max"], tuple(r["choices"]),
                     r["pow2"], r["per_target"], "GPUIO_" + name.replace(".", "_").upper() if settable else None))
        if owner == "engine":
            for key, what in _SECTIONS.items():
                keys = ", ".join(r["name"] for r in tables[key])
                add(Knob(key, "engine", key, None, "dict", f"{what}: dict({keys}); None: their defaults "
                         f"(gpuio.defaults.knobs({key!r}) documents each)"))
    for key, value in _core.table_defaults().items():
        add(Knob(f"table.{key}", "table", key, value, "int", _TABLE_DOCS[key]))
    for key, value in _core.array_defaults().items():
        add(Knob(f"array.{key}", "array", key, value, "int", _ARRAY_DOCS[key]))
    for key, var, doc in _ENVIRONMENT:
        add(Knob(f"environment.{key}", "environment", key, "", "str", doc, env=var, source="Python", env_only=True))
    for owner, key, default, doc, extra in _PYTHON_KNOBS:
        extra = dict(extra)
        like = extra.pop("like", None)
        name = f"{owner}.{key}"
        if like:  # the same value as another knob's default (streams.block_size is the engine's block_size)
            default = rows[like].default
            extra = dict(min=rows[like].min, max=rows[like].max, pow2=rows[like].pow2, **extra)
        old = rows.get(name)  # Python owns a C++ knob's default (gpu.stream_wait's "auto")
        if old is not None:
            doc = f"{doc} (C++ alone: {old.default!r})"
        env = "GPUIO_" + name.replace(".", "_").upper() if owner in ("gpu", "safetensors") else None
        k = Knob(name, owner, key, default, _type_of(default) if default is not None else "int", doc, env=env,
                 source="Python", **extra)
        if old is not None:
            rows[name] = k  # in the C++ row's place
        else:
            add(k)
    return rows


_KNOBS: dict[str, Knob] = _build()
_set: dict[str, Any] = {}       # set()'s values
_lock = threading.Lock()
# Called with set()'s new values once they are in force: an owner whose object already runs with other values
# says so (the process engine warns that it keeps its own until it is made again).
_on_set: list = []


def on_set(hook) -> None:
    """Register hook(values: dict) to be called after each set() (not when a `with` block restores values)."""
    _on_set.append(hook)


def knobs(owner: str | None = None) -> list[Knob]:
    """The table's rows (of one owner: "engine", "gpu", "streams", ...), in the table's order."""
    if owner is not None and owner not in OWNERS:
        raise ValueError(f"unknown owner {owner!r}; known: {', '.join(OWNERS)}")
    return [k for k in _KNOBS.values() if owner is None or k.owner == owner]


def knob(name: str) -> Knob:
    """The row of one knob; ValueError naming close names for a name the table does not hold."""
    k = _KNOBS.get(name)
    if k is None:
        import difflib

        near = difflib.get_close_matches(name, list(_KNOBS), n=3)
        raise ValueError(f"unknown knob {name!r}" + (f"; did you mean {', '.join(near)}?" if near else
                                                      " (gpuio.defaults.knobs() lists them)"))
    return k


def defaults_of(owner: str) -> dict:
    """{keyword: default} of one owner's knobs: its signature defaults (what its DEFAULTS view was)."""
    return {k.key: k.default for k in knobs(owner)}


def _parse_env(k: Knob, raw: str) -> Any:
    where = f"{k.env}={raw!r}"
    if k.type == "bool":
        if raw.lower() in ("1", "true", "on", "yes"):
            return True
        if raw.lower() in ("0", "false", "off", "no"):
            return False
        raise ValueError(f"{where}: {k.name} expects 1/0, true/false, on/off")
    if k.type in ("int", "float"):
        try:
            return int(raw, 0) if k.type == "int" else float(raw)
        except ValueError:
            raise ValueError(f"{where}: {k.name} expects {'an integer' if k.type == 'int' else 'a number'}") from None
    return raw


def check(name: str, value: Any) -> None:
    """TypeError/ValueError naming the knob when value is not one it takes: C++'s own check for a C++ knob (the
    one gpuio.Engine's keywords go through), the row's type, range and choices for the others."""
    k = knob(name)
    if k.source == "C++" and k.owner in ("engine", "gpu", "sim", "fault", "rbd") and k.type != "dict":
        _core.check_knob(k.owner, k.key, value)
        return
    want = {"int": int, "bool": bool, "str": str, "float": (int, float)}.get(k.type)
    if want is not None and (not isinstance(value, want) or (k.type != "bool" and isinstance(value, bool))):
        raise TypeError(f"{name} must be {'a' if k.type != 'int' else 'an'} {k.type}, got {type(value).__name__} "
                        f"{value!r}")
    if k.choices and value not in k.choices:
        raise ValueError(f"{name}={value!r} is not one of {', '.join(k.choices)}")
    pow2_bad = k.pow2 and (value <= 0 or value & (value - 1))
    if (k.min is not None and value < k.min) or (k.max is not None and value > k.max) or pow2_bad:
        rt = k.range_text()
        raise ValueError(f"{name}={value!r} must " + (f"be {rt}" if rt.startswith((">", "<")) else
                                                     f"be a {rt.replace('[', 'in [', 1)}" if k.pow2 else
                                                     f"lie in {rt}"))


def get(name: str) -> Any:
    """The value in force: set()'s, else the environment variable's (checked: ValueError naming the variable),
    else the default."""
    k = knob(name)
    with _lock:
        if name in _set:
            return _set[name]
    if k.env_only:
        return os.environ.get(k.env, k.default)
    if k.env is not None and k.env in os.environ:
        raw = os.environ[k.env]
        value = _parse_env(k, raw)
        try:
            check(name, value)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{k.env}={raw!r}: {e}") from None
        return value
    return k.default


def values(owner: str, keys: Iterable[str] | None = None) -> dict:
    """{keyword: value in force} of one owner's knobs (of `keys` only, when given)."""
    want = None if keys is None else frozenset(keys)
    return {k.key: get(k.name) for k in knobs(owner) if want is None or k.key in want}


def source(name: str) -> str:
    """Where get(name) comes from: "set", the variable's name, or "default"."""
    k = knob(name)
    with _lock:
        if name in _set:
            return "set"
    return k.env if k.env is not None and k.env in os.environ else "default"


class Settings:
    """What set() returns: the new values are in force at once; used as a context manager, the previous ones come
    back when the block ends (KvikIO's ConfigContextManager)."""

    def __init__(self, previous: dict):
        self._previous = previous

    def __enter__(self) -> "Settings":
        return self

    def __exit__(self, *exc) -> None:
        with _lock:
            for name, old in self._previous.items():
                if old is _UNSET:
                    _set.pop(name, None)
                else:
                    _set[name] = old


_UNSET = object()


def set(config: str | Mapping[str, Any] | None = None, value: Any = _UNSET, /, **kw: Any) -> Settings:  # noqa: A001
    """Set process-wide knobs: set("workers", 4), set({"gpu.bounce_bytes": 1 << 27}) or set(queue_depth=64). Every
    value is checked first (the knob's own check; nothing changes when one fails). Only knobs with an environment
    variable are settings; the others are refused, naming the keyword to pass instead."""
    if isinstance(config, str):
        if value is _UNSET:
            raise TypeError(f"set({config!r}) needs a value: set({config!r}, value)")
        given = {config: value}
    else:
        if value is not _UNSET:
            raise TypeError("set(mapping) takes no second argument")
        given = dict(config or {})
    given.update(kw)
    for name, v in given.items():
        k = knob(name)
        if k.env_only:
            raise ValueError(f"{name} is read from the environment only, where it acts: set {k.env} in the "
                             f"environment before gpuio uses it")
        if k.env is None:
            where = ("a per-file option: pass it where the file is opened (open_files, Engine.open_target)"
                     if k.per_target else
                     _PASS_TO.get(k.owner, f"a keyword of {OWNERS[k.owner].split(' keywords')[0]}"))
            raise ValueError(f"{name} is not a process-wide setting (no environment variable): it is {where}")
        check(name, v)
    with _lock:
        previous = {name: _set.get(name, _UNSET) for name in given}
        _set.update(given)
    for hook in _on_set:
        hook(given)
    return Settings(previous)


def reset(*names: str) -> None:
    """Forget set()'s values (of the names given; all without names): the environment or the default again."""
    with _lock:
        for name in names or list(_set):
            knob(name)
            _set.pop(name, None)


def listing(owner: str | None = None) -> list[dict]:
    """The table as plain rows (name, value in force, its source, default, range, env, doc): `gpuio defaults`."""
    out = []
    for k in knobs(owner):
        try:
            value, src = get(k.name), source(k.name)
        except ValueError as e:
            value, src = None, f"error: {e}"
        out.append(dict(name=k.name, owner=k.owner, value=value, source=src, default=k.default, type=k.type,
                        range=k.range_text(), env=k.env, per_target=k.per_target, owned_by=k.source, doc=k.doc))
    return out


def keyword_doc(owner: str, width: int = 110, indent: int = 6) -> str:
    """The owner's knobs as a docstring block (name, default, range, env, doc): Engine's and attach_gpu's help."""
    import textwrap

    pad = " " * indent
    lines = []
    for k in knobs(owner):
        extra = "; ".join(x for x in (f"default {k.default!r}", k.range_text(), k.env or "",
                                      "per file" if k.per_target else "") if x)
        lines.append(textwrap.fill(f"{k.key}: {k.doc} ({extra})", width, initial_indent=pad,
                                   subsequent_indent=pad + "    "))
    return "\n".join(lines)


__all__ = ["OWNERS", "Knob", "Settings", "check", "defaults_of", "get", "keyword_doc", "knob", "knobs", "listing",
           "on_set", "reset", "set", "source", "values"]
