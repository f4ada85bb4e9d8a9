"""The report of gpuio.gnn.hetero_job: the per-run table, the comparisons, and one `judged:` line per point
the job is judged on (figure, goal, met or not, and over which steps it was measured) — plus the helpers the job
uses to cap each run's time: `parse_caps` (the `--time-cap` spec), `cap_for`, `plan_caps` (caps shrunk to
a time budget).

Runs stopped by their cap are compared over their common steps (same batches, same order); a 100-step
figure of a capped run is extrapolated at its pace after `warmup` steps and labelled so.
"""
from __future__ import annotations

import numpy as np

BACKENDS = ("gpuio", "mmap", "memory")
STRUCTURES = ("file", "memory")
CAP_LOAD = "load"  # the --time-cap label of gpuio's loading-alone pass (--timing)
GOALS = dict(mmap=3.0, bound=1.2, belady=1.2, structure=0.8, disk=0.9)  # the bars: docs/decisions/0007
RUN_OVERHEAD_S = 25.0  # per run, outside its capped steps (stores, host buffer, evaluation): plan_caps


# -- time caps -------------------------------------------------------------------------------------
def parse_caps(spec) -> dict:
    """`--time-cap`: "" or 0 (no cap), "SECONDS" (every run), or "LABEL=SECONDS,..." with LABEL a backend
    (gpuio, mmap, memory), backend/structure (gpuio/memory), `load` (gpuio's loading-alone pass) or `*`
    (the rest). Returns {label: seconds}; ValueError on anything else."""
    if isinstance(spec, (int, float)):
        spec = str(spec)
    spec = (spec or "").strip()
    if not spec:
        return {}
    labels = {*BACKENDS, *(f"{b}/{s}" for b in BACKENDS for s in STRUCTURES), CAP_LOAD, "*"}
    out = {}
    for part in spec.split(","):
        label, sep, value = part.strip().rpartition("=")
        label = label.strip() if sep else "*"
        if label not in labels:
            raise ValueError(f"time cap label {label!r} unknown; use one of {sorted(labels)}")
        if label in out:
            raise ValueError(f"time cap label {label!r} given twice")
        try:
            seconds = float(value)
        except ValueError:
            raise ValueError(f"time cap {part.strip()!r}: seconds must be a number") from None
        if not 0 <= seconds <= 86400:
            raise ValueError(f"time cap {part.strip()!r}: seconds must lie in [0, 86400]")
        out[label] = seconds
    return out


def cap_for(caps: dict, *labels) -> float:
    """The cap of the first label present in `caps`, else caps['*'], else 0 (no cap)."""
    for label in labels:
        if label in caps:
            return caps[label]
    return caps.get("*", 0.0)


def plan_caps(caps: list, remaining: float, overhead: float = RUN_OVERHEAD_S, floor: float = 5.0) -> list:
    """Caps for the runs still to come (seconds, 0 = uncapped) fitted into `remaining` seconds of a budget:
    each run costs its cap plus `overhead`; when they do not fit, every cap is scaled by the same factor
    (uncapped runs share the room the capped ones leave, each at least `floor`),
    never below `floor` (nor above the cap given). remaining None: the caps as given."""
    if remaining is None or not caps:
        return list(caps)
    room = remaining - overhead * len(caps)
    known = [c for c in caps if c > 0]
    guess = max((room - sum(known)) / max(len(caps) - len(known), 1), floor)
    nominal = [c if c > 0 else guess for c in caps]
    scale = min(1.0, max(room, 0.0) / sum(nominal))
    return [min(c, max(c * scale, floor)) for c in nominal]


# -- step arithmetic -------------------------------------------------------------------------------
def at(r: dict, n: int) -> float:
    """Seconds from the start of r's timed run to the end of its step n (1-based); the run's wall time when
    it made exactly n steps (that includes the final synchronisation)."""
    if n <= 0:
        return 0.0
    return r["run_s"] if n == r["steps"] else r["step_end_s"][n - 1]


def pace(r: dict, lo: int, hi: int) -> float:
    """Seconds per step over steps lo+1..hi (1-based, hi <= r's steps)."""
    return (at(r, hi) - at(r, lo)) / max(hi - lo, 1)


def warm_steps(n: int, warmup: int) -> int:
    """Warm-up steps left out of a per-step comparison over n steps: `warmup`, or a quarter of n when it is
    negative (auto); always leaves at least one step."""
    w = n // 4 if warmup < 0 else warmup
    return max(0, min(w, n - 1))


def projected(r: dict, steps: int, warmup: int) -> tuple:
    """(seconds for `steps` steps, measured?): measured when r made them, else r's time so far plus the
    missing steps at its pace after the warm-up."""
    n = r["steps"]
    if n >= steps:
        return at(r, steps), True
    w = warm_steps(n, warmup)
    return at(r, n) + (steps - n) * pace(r, w, n), False


def same_losses(a: list, b: list) -> str:
    """How two loss sequences compare: identical, within float tolerance, or different (with the max gap)."""
    if len(a) != len(b):
        return f"NOT COMPARABLE ({len(a)} vs {len(b)} steps) to"
    diff = float(np.max(np.abs(np.array(a) - np.array(b)))) if a else 0.0
    if diff == 0:
        return "identical to"
    close = diff <= 1e-4 * max(b)
    return f"{'within 1e-4' if close else 'DIFFERENT'} (max |diff| {diff:.2e}) {'of' if close else 'from'}"


def _find(results, backend, structure):
    return next((r for r in results if r["backend"] == backend and r.get("structure") == structure), None)


def _verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


# -- judged lines ----------------------------------------------------------------------------------
def judged_lines(results: list, info: dict) -> list:
    """One line per judged point that the runs allow (the bars: docs/decisions/0007), each `judged: <point>: <figure>
    (goal ...): MET | NOT MET [how measured]`. info: steps (the configured steps), warmup, feature_bytes, num_edges,
    limit (cgroup bytes or None), struct_cache_mb (in all), structure_file_bytes, disk_mbs (the raw device's 4 KiB
    random-read rate, MB/s, measured outside the job; 0: not given)."""
    out = []
    steps, warmup = info["steps"], info.get("warmup", -1)
    fb, ne, limit = info.get("feature_bytes", 0), info.get("num_edges", 0), info.get("limit")
    scale = (f"judged: scale: {fb / 1e9:.1f} GB of features (>= 20 GB: {'yes' if fb >= 20e9 else 'NO'}), "
             f"{ne / 1e6:.1f} M edges (>= 100 M: {'yes' if ne >= 100e6 else 'NO'}), ")
    out.append(scale + (f"features {fb / limit:.2f} x the memory cgroup's limit ({limit / 2**30:.1f} GiB)" if limit
                        else "NO memory cgroup (out-of-core figures need one)"))
    for s in STRUCTURES:
        gp, mm = _find(results, "gpuio", s), _find(results, "mmap", s)
        if gp is None or mm is None:
            continue
        tg, g_meas = projected(gp, steps, warmup)
        tm, m_meas = projected(mm, steps, warmup)
        n = min(gp["steps"], mm["steps"])
        w = warm_steps(n, warmup)
        first = at(mm, n) / max(at(gp, n), 1e-9)
        per_step = pace(mm, w, n) / max(pace(gp, w, n), 1e-9)
        ratio = tm / max(tg, 1e-9)
        notes = [f"{name}: {q['steps']} steps measured, the rest at the pace of steps "
                 f"{warm_steps(q['steps'], warmup) + 1}-{q['steps']}" for name, q, meas in
                 (("gpuio", gp, g_meas), ("mmap", mm, m_meas)) if not meas]
        how = "; ".join(notes) if notes else "both measured"
        out.append(f"judged: {steps}-step time vs the mmap loader (structure {s}): gpuio {tg:.1f} s, mmap {tm:.1f} s "
                   f"= {ratio:.2f} x (goal >= {GOALS['mmap']:.0f} x): {_verdict(ratio >= GOALS['mmap'])} [{how}; "
                   f"same batches: {first:.2f} x over steps 1-{n}, {per_step:.2f} x per step over steps {w + 1}-{n}]")
    for r in results:
        if "vs_bound" in r:
            b = r["bound"]
            out.append(f"judged: run / max(loading alone, compute alone) ({r['label']}): {b['run_s']:.2f} s / "
                       f"max({b['load_s']:.2f} s, {b['compute_s']:.2f} s) = {r['vs_bound']:.3f} (goal <= "
                       f"{GOALS['bound']}): {_verdict(r['vs_bound'] <= GOALS['bound'])} [over steps 1-{b['steps']}; "
                       f"compute alone scaled from {b['compute_steps']} held batches]")
    disk = info.get("disk_mbs", 0.0)
    for r in results:
        ranks = r.get("ranks") or []
        if disk and r["backend"] == "gpuio" and ranks:
            wall, read = all_ranks(ranks)
            mbs = read / max(wall, 1e-9) / 1e6
            wait, words = regime(r, ranks)
            storage_bound = wait > 0.5 and "feature reads" in words
            what = f"{len(ranks)} GPU(s) when the disk is the bound"
            if not storage_bound:
                out.append(f"judged: {what}: not this regime ({words}); storage read {mbs:,.1f} MB/s = "
                           f"{mbs / disk:.2f} x the disk's {disk:,.1f} MB/s")
                continue
            out.append(f"judged: {what}: storage read {mbs:,.1f} MB/s over all ranks = {mbs / disk:.2f} x the disk's "
                       f"4 KiB random-read rate {disk:,.1f} MB/s (goal >= {GOALS['disk']}): "
                       f"{_verdict(mbs / disk >= GOALS['disk'])} [regime: {words}, trainers waited {wait:.0%}; "
                       "features and structure; the disk's rate measured outside the job, --disk-mbs]")
    for r in results:
        if "per_type" in r:
            out.append(f"judged: cache hit rates per tier ({r['label']}, GIDS Table 1; rows requested): host buffer "
                       f"{r['host_hit_rate']:.3f}, GPU cache {r['gpu_hit_rate']:.3f}, storage {r['device_rate']:.3f}; "
                       "per type host/GPU/storage: " + ", ".join(
                           f"{nt} {v['host']:.2f}/{v['gpu']:.2f}/{v['storage']:.2f}" for nt, v in r["per_type"].items()))
    for r in results:
        if "belady" in r:
            b = r["belady"]
            out.append(f"judged: bytes read vs Belady's MIN ({r['label']}, same trace, same host buffer and GPU cache "
                       f"slots): {b['gpuio_bytes'] / 1e9:.2f} GB vs {b['min_bytes'] / 1e9:.2f} GB = {b['ratio']:.3f} "
                       f"(goal <= {GOALS['belady']}): {_verdict(b['ratio'] <= GOALS['belady'])} [device tier alone "
                       f"{b['device_tier_ratio']:.3f}; over {r['steps']} steps]")
    for backend in BACKENDS:
        f, m = _find(results, backend, "file"), _find(results, backend, "memory")
        if f is None or m is None:
            continue
        n = min(f["steps"], m["steps"])
        ratio = at(m, n) / max(at(f, n), 1e-9)
        files_mib = info.get("structure_file_bytes", 0) / 2**20
        cache = min(info.get("struct_cache_mb", 0), files_mib)  # split_struct_cache gives no file more than itself
        out.append(f"judged: structure on storage vs in memory ({backend}): {ratio:.3f} x the steps/s (goal >= "
                   f"{GOALS['structure']}): {_verdict(ratio >= GOALS['structure'])} [same batches, steps 1-{n}; "
                   f"structure cache {info.get('struct_cache_mb', 0)} MiB in all, {cache:.0f} MiB of device memory "
                   f"(pointer files whole first, then the neighbour lists by file size) for {files_mib:.0f} MiB of "
                   f"structure files; {f['structure_bytes'] / 2**20:.1f} MiB of "
                   f"structure read in {f['steps']} steps; losses {same_losses(f['losses'][:n], m['losses'][:n])} "
                   "the in-memory structure's]")
    for r in results:
        ref = _find(results, "memory", r.get("structure"))
        if ref is not None and r is not ref and r["losses"] and ref["losses"]:
            n = min(r["steps"], ref["steps"])
            out.append(f"judged: same losses as in-memory features ({r['label']}): losses "
                       f"{same_losses(r['losses'][:n], ref['losses'][:n])} in-memory features over {n} steps; "
                       f"test accuracy {r.get('test_acc', float('nan')):.3f} vs {ref.get('test_acc', float('nan')):.3f}")
    for r in results:
        if r["backend"] == "gpuio" and "test_acc" in r and _find(results, "memory", r.get("structure")) is None:
            out.append(f"judged: accuracy ({r['label']}): test accuracy {r['test_acc']:.3f} after {r['steps']} steps "
                       "(no in-memory run at this scale: equality of losses is checked by the small in-memory run)")
    return out


def all_ranks(ranks: list) -> tuple:
    """(seconds of the slowest rank, bytes all ranks read from storage: features and structure)."""
    return max(q["run_s"] for q in ranks), sum(q["feature_bytes"] + q["structure_bytes"] for q in ranks)


def regime(r: dict, ranks: list) -> tuple:
    """(trainers' waiting share, words naming the regime) of a run over all its ranks."""
    wait = sum(q["stall_s"] for q in ranks) / max(sum(q["run_s"] for q in ranks), 1e-9)
    sample = sum(q.get("sample_s", 0.0) for q in ranks)
    feature = sum(q.get("feature_s", 0.0) for q in ranks)
    # the producer's larger share names what the trainers wait on (sample_s: its wait for sampled
    # batches); sampling runs where the structures deliver (the job's device)
    bound = ("sampling" if sample > feature else
             "feature reads" if r["backend"] == "gpuio" else "feature page faults")
    return wait, (f"loading-bound: the trainers wait on {bound}" if wait > 0.5 else "compute-bound: loading keeps up")


def print_report(results: list, say=print, info: dict | None = None) -> None:
    """The table of every run, hit rates, Belady, bounds, memory, throughput over all ranks, the
    comparisons, then the `judged:` lines (judged_lines; info as there)."""
    cols = [r.get("label", r["backend"]) for r in results]
    width = max([12] + [len(c) + 2 for c in cols])
    say(f"{'':28}" + "".join(f"{c:>{width}}" for c in cols))
    fmt = (lambda v: f"{v:>{width}.3f}" if isinstance(v, float) else f"{v:>{width}}")
    rows = [("steps", "steps"), ("time for the steps s", "run_s"), ("ms per step", "step_ms"),
            ("feature loading s", "feature_s"), ("sampling s", "sample_s"), ("trainer waiting s", "stall_s"),
            ("compute s", "compute_s"), ("host buffer hit rate", "host_hit_rate"),
            ("GPU cache hit rate", "gpu_hit_rate"), ("rows from storage", "device_rate"),
            ("structure bytes read (steps)", "structure_bytes"),
            ("structure bytes read at open", "structure_bytes_open"), ("test accuracy", "test_acc"),
            ("time cap s", "time_cap_s")]
    for name, key in rows:
        say(f"{name:28}" + "".join(fmt(r[key]) if key in r else f"{'-':>{width}}" for r in results))
    for r, name in zip(results, cols):
        if "per_type" in r:
            say(f"{name} hit rates per type (host / GPU / storage): " + ", ".join(
                f"{nt} {v['host']:.2f}/{v['gpu']:.2f}/{v['storage']:.2f}" for nt, v in r["per_type"].items()))
        if "belady" in r:
            b = r["belady"]
            say(f"{name} bytes read {b['gpuio_bytes']:,} vs Belady MIN {b['min_bytes']:,} (same host "
                f"buffer, same device cache slots): ratio {b['ratio']:.3f} (goal <= 1.2), device tier alone "
                f"{b['device_tier_ratio']:.3f}; vs MIN using all capacity as one cache {b['ratio_whole']:.3f}; "
                f"keep-the-soonest seeing {b['lookahead']} batches ahead: {b['window_min_ratio']:.3f} x MIN")
        if "vs_bound" in r:
            b = r["bound"]
            say(f"{name}: load alone {b['load_s']:.3f} s, compute alone {b['compute_s']:.3f} s (scaled from "
                f"{b['compute_steps']} steps), run {b['run_s']:.3f} s, over steps 1-{b['steps']}; "
                f"run / max(load, compute) = {r['vs_bound']:.3f}")
    for r, name in zip(results, cols):
        m = r.get("cgroup")
        if m and m["limit"] is not None:
            say(f"{name}: cgroup peak so far {m['peak'] / 2**30:.2f} GiB of {m['limit'] / 2**30:.2f} GiB; at the end "
                f"anonymous {m['anon'] / 2**30:.2f} GiB, page cache {m['file'] / 2**30:.2f} GiB")
    for r, name in zip(results, cols):  # over all ranks: the figures the 1- vs N-GPU comparison uses
        ranks = r.get("ranks") or []
        if not ranks:
            continue
        wall, read = all_ranks(ranks)
        seeds = sum(q["steps"] for q in ranks) * r["batch_size"]
        wait, words = regime(r, ranks)
        say(f"{name}: {len(ranks)} rank(s): {seeds / wall:,.0f} seeds/s ({seeds:,} seeds in {wall:.2f} s, slowest "
            f"rank); storage read {read / wall / 1e6:,.1f} MB/s over all ranks "
            f"({'features and structure' if r['backend'] == 'gpuio' else 'structure only; page faults not counted'}); "
            f"trainers waited {wait:.0%} of the time ({words})")
    for r, name in zip(results, cols):
        if r.get("capped"):
            say(f"{name}: capped by --time-cap after {r['steps']} steps ({r['run_s']:.1f} s; all steps at that pace "
                f"~{r['run_s'] * r['cfg_steps'] / max(r['steps'], 1):.0f} s, extrapolated); not evaluated")
    for r, name in zip(results, cols):
        ref = _find(results, "memory", r.get("structure")) or next((q for q in results if q["backend"] == "memory"),
                                                                   None)
        if ref is not None and r is not ref and r["losses"] and ref["losses"]:
            n = min(r["steps"], ref["steps"])
            say(f"{name}: losses {same_losses(r['losses'][:n], ref['losses'][:n])} in-memory features over {n} steps; "
                f"time x{at(r, n) / at(ref, n):.2f} of in-memory")
    for structure in STRUCTURES:
        mm, gp = _find(results, "mmap", structure), _find(results, "gpuio", structure)
        if mm is not None and gp is not None:
            n = min(mm["steps"], gp["steps"])
            say(f"gpuio vs mmap (structure {structure}): {at(mm, n) / at(gp, n):.2f} x faster over "
                f"{'the same' if n == gp['steps'] == mm['steps'] else 'the first'} {n} steps (same batches)")
    for backend in BACKENDS:
        f, m = _find(results, backend, "file"), _find(results, backend, "memory")
        if f is not None and m is not None:
            n = min(f["steps"], m["steps"])
            say(f"{backend}: structure on storage keeps {at(m, n) / at(f, n):.3f} x the steps/s of structure in "
                f"memory over {n} steps (goal >= 0.8; same batches: losses "
                f"{same_losses(f['losses'][:n], m['losses'][:n])} the in-memory structure's), structure read "
                f"{f['structure_bytes'] / 2**20:.1f} MiB in {f['steps']} steps")
    if info is not None:
        for r, name in zip(results, cols):
            if r.get("ranks"):
                wait, words = regime(r, r["ranks"])
                say(f"judged: regime ({name}): {words} (trainers waited {wait:.0%} of the time)")
        for line in judged_lines(results, info):
            say(line)
