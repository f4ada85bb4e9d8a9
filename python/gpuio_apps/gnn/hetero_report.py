"""The report of gpuio_apps.gnn.hetero_job. By default the summary `gpuio demo` prints for its own job (print_summary:
its table with one column per run, its checks, what limits each run in words, its headline); with `judge` also the
full report: the per-run table, the comparisons, and one `judged:` line per judged point (figure, goal, met or not,
and over which steps it was measured). Also the helpers the job uses to cap each run's time: `parse_caps` (the
`--time-cap` spec), `cap_for`, `plan_caps` (caps shrunk to a time budget).

Runs stopped by their cap are compared over their common steps (same batches, same order); a full-length figure
of a capped run is extrapolated at its pace after `warmup` steps and labelled so.
"""
from __future__ import annotations

import numpy as np

BACKENDS = ("gpuio", "mmap", "memory")
STRUCTURES = ("file", "memory")
CAP_LOAD = "load"  # the --time-cap label of gpuio's loading-alone pass (--timing)
GOALS = dict(mmap=3.0, bound=1.2, belady=1.2, structure=0.8, disk=0.9)  # the bars: docs/decisions/0007
CPU_BOUND = 1.3  # compute this many times the in-memory run's while the trainer seldom waited: loading took the CPU
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
            wait, words = regime(r, ranks, _find(results, "memory", r.get("structure")))
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


def regime(r: dict, ranks: list, ref: dict | None = None) -> tuple:
    """(trainers' waiting share, words naming the regime) of a run over all its ranks. ref: the in-memory run of
    the same structure: a run whose trainers seldom wait but whose compute per step takes CPU_BOUND x ref's or
    more is CPU-bound (loading takes the cores training needs), not "loading keeps up"."""
    wait = sum(q["stall_s"] for q in ranks) / max(sum(q["run_s"] for q in ranks), 1e-9)
    sample = sum(q.get("sample_s", 0.0) for q in ranks)
    feature = sum(q.get("feature_s", 0.0) for q in ranks)
    # the producer's larger share names what the trainers wait on (sample_s: its wait for sampled
    # batches); sampling runs where the structures deliver (the job's device)
    bound = ("sampling" if sample > feature else
             "feature reads" if r["backend"] == "gpuio" else "feature page faults")
    if wait > 0.5:
        return wait, f"loading-bound: the trainers wait on {bound}"
    per_step = (lambda q: q.get("compute_s", 0.0) / max(q.get("steps", 0), 1))
    if ref is not None and ref is not r and per_step(r) >= CPU_BOUND * max(per_step(ref), 1e-9):
        return wait, (f"CPU-bound: loading takes the cores training needs (compute {per_step(r) / per_step(ref):.1f}x "
                      "the in-memory run's per step)")
    return wait, "compute-bound: loading keeps up"


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
        wait, words = regime(r, ranks, _find(results, "memory", r.get("structure")))
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
                wait, words = regime(r, r["ranks"], _find(results, "memory", r.get("structure")))
                say(f"judged: regime ({name}): {words} (trainers waited {wait:.0%} of the time)")
        for line in judged_lines(results, info):
            say(line)


def header(cfg, ds, reused: bool, world: int) -> str:
    """The job's first line: the graph, its features, an epoch, the device."""
    n_train = int(ds.train_idx.numel())
    epoch = min(cfg.steps * cfg.batch_size * world, n_train)
    return (f"gpuio demo --hetero: RGAT on an IGBH-shaped graph in {cfg.root} "
            f"({'reused' if reused else 'written'}): {sum(ds.num_nodes.values()):,} nodes of 4 types "
            f"({', '.join(f'{n:,} {t}' for t, n in ds.num_nodes.items())}), {ds.num_edges:,} edges, "
            f"{ds.feature_bytes() / 2**20:,.0f} MiB of features ({ds.feature_shape('paper')[1]} per node); "
            f"an epoch: {cfg.steps} steps of {cfg.batch_size} seed papers ({epoch:,} of the {n_train:,} training "
            f"papers), fan-outs {tuple(cfg.fanouts)}, structure {cfg.structure}, device {cfg.device}, {world} rank(s)")


# -- the summary (`gpuio demo --hetero` by default): gpuio demo's table, checks and headline --------------------
def demo_rows(results: list, steps: int, warmup: int = -1) -> list:
    """The runs as gpuio_apps.gnn.demo_report's rows. An epoch is the configured `steps`: a capped run's epoch is
    projected (its steps, then the rest at its pace after the warm-up steps: `projected`) and its parts are
    scaled alike. storage_mbs: what the run read from storage through gpuio (features and structure) per second."""
    rows = []
    for r in results:
        epoch = projected(r, steps, warmup)[0] if r["steps"] else r["run_s"]
        k = epoch / max(r["run_s"], 1e-9)
        row = dict(backend=r.get("label", r["backend"]), kind=r["backend"], structure=r.get("structure"),
                   epoch_s=epoch, losses=r["losses"], sums=r.get("sums", []), capped=bool(r.get("capped")),
                   batches_run=r["steps"], batches_per_epoch=steps, test_acc=r.get("test_acc", float("nan")),
                   storage_mbs=(r.get("feature_bytes", 0) + r.get("structure_bytes", 0)) / max(r["run_s"], 1e-9) / 1e6,
                   **{key: r.get(key, 0.0) * k for key in ("feature_s", "stall_s", "compute_s", "sample_s")})
        row.update({key: r[key] for key in ("host_hit_rate", "gpu_hit_rate", "device_rate", "data_path") if key in r})
        cg = r.get("cgroup")
        if cg and cg.get("peak") is not None:
            cap = f"limit {cg['limit'] / 2**20:,.0f} MiB" if cg.get("limit") else "no limit"
            most = f"at most {cg['file_max'] / 2**20:,.0f} MiB at a step's end; " if "file_max" in cg else ""
            row.update(cgroup_peak=cg["peak"], cgroup_cache=cg["file"],
                       cache_note=f"{most}{cap}; the dataset's files evicted from the page cache")
        rows.append(row)
    return rows


def limit_lines(rows: list, cores: int) -> list:
    """What limits each run, in words: waiting for its batches (and for what), loading taking the CPU from
    training (the trainer seldom waited but its compute took CPU_BOUND x the in-memory run's or more), or the
    model's compute (loading keeps up)."""
    ref = next((r for r in rows if r["kind"] == "memory"), None)
    out = []
    for r in rows:
        wait = r["stall_s"] / max(r["epoch_s"], 1e-9)
        slower = r["compute_s"] / max(ref["compute_s"], 1e-9) if ref is not None and r is not ref else None
        if wait >= 0.5:
            if r["sample_s"] > r["feature_s"]:
                what = "sampling neighbours (the graph structure), more than for features"
            elif r["kind"] == "gpuio":
                what = (f"features read from storage: the disk sets the pace ({r['storage_mbs']:,.0f} MB/s read, "
                        f"{r.get('device_rate', 0):.0%} of the rows from storage, the rest from its caches)")
            elif r["kind"] == "mmap":
                what = ("page faults: each row missing from the page cache is a synchronous 4 KiB read from the disk, "
                        "one after the other")
            else:
                what = "its features"
            out.append(f"{r['backend']}: waiting for data: the trainer waited {wait:.0%} of the epoch for {what}")
        elif slower is not None and slower >= CPU_BOUND:
            out.append(f"{r['backend']}: the CPU: the trainer waited only {wait:.0%} of the epoch, but its compute "
                       f"took {slower:.1f}x as long as with in-memory features: loading and training share the "
                       f"machine's {cores} CPU cores")
        else:
            tail = "" if slower is None else f"; compute {slower:.2f}x the in-memory run's"
            out.append(f"{r['backend']}: the model's compute: loading keeps up (the trainer waited {wait:.0%} of the "
                       f"epoch{tail})")
    return out


def meaning(rows: list, larger: float | None, cores: int) -> str:
    """One line: what the gpuio run's limit means for a user."""
    g, m = (next((r for r in rows if r["kind"] == k), None) for k in ("gpuio", "memory"))
    if g is None:
        return ""
    vs = f" ({g['epoch_s'] / max(m['epoch_s'], 1e-9):.1f}x the in-memory epoch)" if m is not None else ""
    mem = f"with features {larger:.0f}x larger than its memory" if larger else "with no memory limit"
    line = limit_lines([r for r in (m, g) if r is not None], cores)[-1]
    if ": waiting for data:" in line and g["sample_s"] <= g["feature_s"]:
        return (f"so: gpuio trains {mem}{vs}, as fast as the disk delivers the rows its caches miss; more memory for "
                f"its caches (--memory-fraction) or a faster disk shortens the epoch")
    if ": the CPU:" in line:
        return (f"so: gpuio trains {mem}{vs}; on {cores} cores its loading takes CPU time from training: with more "
                f"cores (or a GPU for the model) loading overlaps training")
    return f"so: gpuio trains {mem}{vs} and keeps the model busy: loading is not what limits it"


class _Lines:
    """A rich console (print of strings and tables) whose output goes, as text, to `say` (the job's log: rank 0
    only, captured by tests)."""

    def __init__(self, say):
        self.say = say

    def print(self, obj="") -> None:
        import io
        import shutil
        import sys

        from rich.console import Console
        c = Console(file=io.StringIO(), width=max(100, shutil.get_terminal_size().columns), highlight=False,
                    force_terminal=sys.stdout.isatty())
        c.print(obj, soft_wrap=isinstance(obj, str))  # a line stays one line; a table fits the width
        self.say(c.file.getvalue().rstrip("\n"))


def print_summary(results: list, cfg, say=print, larger: float | None = None, deterministic: str | None = None,
                  cores: int = 1) -> None:
    """gpuio demo's table (one column per run), the checks (features byte-identical on every step; losses
    identical where the kernels are deterministic: the CPU's, or CUDA's with `deterministic` == ""), what
    limits each run, and the headline. larger: features / the memory given (None: no limit); deterministic:
    gpuio_apps.gnn.hetero_kernels.DeterministicKernels.verdict()."""
    from gpuio_apps.gnn import demo_report
    rows = demo_rows(results, cfg.steps, cfg.warmup_steps)
    if not rows:
        return
    out = _Lines(say)
    demo_report.print_table(rows, out)
    cuda = cfg.device.startswith("cuda")
    exact = not cuda or deterministic == ""
    why = ("GPU atomics: torch's fast CUDA kernels add in a different order each run; --deterministic makes them "
           "identical" if deterministic is None else f"rounding: not every op has a deterministic CUDA kernel: "
           f"{deterministic}")
    demo_report.print_checks(rows, cfg, out, exact_losses=exact, rounding=why,
                             kernels="deterministic CUDA kernels" if cuda and deterministic == "" else "")
    out.print("what limits each run:")
    for line in limit_lines(rows, cores):
        out.print("  " + line)
    text = meaning(rows, larger, cores)
    if text:
        out.print("  " + text)
    first = [dict(r, backend=r["kind"]) for r in rows if r["structure"] == rows[0]["structure"]]
    demo_report.print_headline(first, cfg, out, larger=larger or 0.0)
