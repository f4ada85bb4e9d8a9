"""Interleaved runs: every configuration of a workload (engine uring, engine posix, each raw grid point)
is measured once per round, the order rotated each round, for `repeats` rounds; the summary takes
medians over rounds (BENCHMARKS.md: ratios side by side in one run, median and spread)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import measure, os_cache
from .workloads import ENGINE_BACKENDS, ENGINE_QUEUE_DEPTHS, RAW_GRID, EngineConfig, RawConfig, Workload


@dataclass
class Options:
    path: str
    size_bytes: int
    workloads: list[Workload]
    repeats: int = 3
    seconds: float = 1.0
    workers: int = 2
    cold: bool = False
    backends: tuple[str, ...] = ENGINE_BACKENDS
    engine_queue_depths: tuple[int, ...] = ENGINE_QUEUE_DEPTHS
    raw_grid: list[RawConfig] = field(default_factory=lambda: list(RAW_GRID))


def configs(o: Options) -> list[tuple[str, object]]:
    return ([("engine", EngineConfig(b, qd)) for b in o.backends for qd in o.engine_queue_depths]
            + [("raw", c) for c in o.raw_grid])


def label(kind: str, cfg) -> str:
    return f"{'gpuio' if kind == 'engine' else 'raw'} {cfg.label}"


def run(o: Options, on_pass=None) -> dict:
    """Measure every workload x configuration `repeats` times, interleaved. on_pass(description, done)
    is called before each pass with the number of passes done so far (progress display). Returns {"samples": {...}, "cache_failure": str|None}."""
    samples: dict[str, dict[str, list[dict]]] = {w.name: {} for w in o.workloads}
    cache_failure = None
    cfgs = configs(o)
    done = 0
    for rnd in range(o.repeats):
        for w in o.workloads:
            k = (rnd + o.workloads.index(w)) % len(cfgs)
            for kind, cfg in cfgs[k:] + cfgs[:k]:  # rotated so no configuration always runs first
                name = label(kind, cfg)
                if on_pass:
                    on_pass(f"round {rnd + 1}/{o.repeats}  {w.name}  {name}", done)
                if o.cold:
                    cache_failure = os_cache.drop_caches() or cache_failure
                if kind == "engine":
                    r = measure.engine_pass(o.path, w, cfg, o.workers, o.seconds, seed=rnd)
                else:
                    r = measure.raw_pass(o.path, w, cfg, o.seconds)
                r["round"] = rnd
                samples[w.name].setdefault(name, []).append(r)
                done += 1
    return {"samples": samples, "cache_failure": cache_failure}


def passes(o: Options) -> int:
    return o.repeats * len(o.workloads) * len(configs(o))


def default_path() -> str:
    return os.path.join(os.getcwd(), "gpuio-bench.dat")
