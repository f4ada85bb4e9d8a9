"""Model weights into GPU memory: gpuio.safetensors beside safetensors, fastsafetensors and Run:ai's streamer.

One standard safetensors file, generated here (no downloads) with `safetensors.torch.save_file`: 132 tensors
shaped like GPT layers (11 x attention qkv/proj, MLP fc/proj, their biases, two layer norms), bf16 and fp32
layers in turn, the hidden size chosen for --size-gib. Then, each method in its own process (imports and
CUDA start outside the clock), every tensor compared bit for bit with the generator's output:
  cold   the page cache dropped right before the load (`sync; echo 3 > /proc/sys/vm/drop_caches` as root;
         elsewhere posix_fadvise(DONTNEED) on the file, said in the regime; the file's resident fraction at the
         start is printed either way)
  warm   the file wholly in the page cache (read in 8 streams right before the load where it is not)
in --rounds rounds, the methods' order rotated each round; best and median per method. Beside them: saving
the same tensors from the device, fsynced (gpuio.safetensors.save_file vs safetensors.torch.save_file +
fsync), a check that gpuio's file loads bit-exact in all three peers, and the raw device on the same file:
the raw reference grid (gpuio_apps.bench, O_DIRECT sequential reads of 128 KiB and 1 MiB, short samples) picks
each size's best configuration, and those (and 1 MiB at QD 128) then read the whole file once in each round's cold
rotation, each in its own process after the same eviction: the disk's best sequential read rate is the best of
those passes (the same bytes as a load, sustained, at the same times; docs/BENCHMARKS.md "Model weights"). One
table of ratios (gpuio / best peer, gpuio / the disk's best read rate) and JSON beside it (--json).

    python3 benchmarks/model_load.py --size-gib 8 --dir /var/tmp/ml          # GPU machine (as root: cold)
    python3 benchmarks/model_load.py --size-gib 0.02 --device cpu --rounds 1  # the CI smoke run
A peer that is not installed is skipped with the reason printed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import torch

from gpuio import defaults
from gpuio_apps.papers.checkpoint import fsync_path as fsync

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_load_report import METHODS, PEERS, ratios, report, summary  # noqa: E402

SAVERS = ("gpuio", "safetensors")
ALIGN = 256                       # every loaded tensor's address is checked against this (misaligned: counted)
LAYERS = 11                       # x 12 tensors = 132, the file
GIB = 1 << 30


# -- the model ----------------------------------------------------------------------------------------------
def shapes(size_bytes: int) -> list[tuple[str, tuple[int, ...], torch.dtype]]:
    """GPT-layer tensors, even layers bf16 and odd ones fp32, hidden size d (a multiple of 64) for the size."""
    per_d2 = sum(12 * (2 if layer % 2 == 0 else 4) for layer in range(LAYERS))  # bytes per d^2 (matrices)
    d = max(64, round((size_bytes / per_d2) ** 0.5 / 64) * 64)
    out = []
    for layer in range(LAYERS):
        dt = torch.bfloat16 if layer % 2 == 0 else torch.float32
        p = f"h.{layer}."
        out += [(p + "ln_1.weight", (d,), dt), (p + "ln_1.bias", (d,), dt),
                (p + "attn.c_attn.weight", (d, 3 * d), dt), (p + "attn.c_attn.bias", (3 * d,), dt),
                (p + "attn.c_proj.weight", (d, d), dt), (p + "attn.c_proj.bias", (d,), dt),
                (p + "ln_2.weight", (d,), dt), (p + "ln_2.bias", (d,), dt),
                (p + "mlp.c_fc.weight", (d, 4 * d), dt), (p + "mlp.c_fc.bias", (4 * d,), dt),
                (p + "mlp.c_proj.weight", (4 * d, d), dt), (p + "mlp.c_proj.bias", (d,), dt)]
    return out


def reference(i: int, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Tensor i as generated (the same bits on every run on one kind of device)."""
    g = torch.Generator(device=device).manual_seed(1000 + i)
    return torch.randn(shape, generator=g, device=device, dtype=dtype)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().reshape(-1).view(torch.uint8), b.to(a.device).contiguous().reshape(-1).view(torch.uint8))


def model(size_bytes: int, device: torch.device) -> dict[str, torch.Tensor]:
    return {name: reference(i, shape, dt, device) for i, (name, shape, dt) in enumerate(shapes(size_bytes))}


def check(tensors: dict[str, torch.Tensor], size_bytes: int, device: torch.device) -> str:
    """'ok' when every tensor is there with the generator's bits, else what is wrong."""
    sh = shapes(size_bytes)
    if set(tensors) != {n for n, _, _ in sh}:
        return f"names differ ({len(tensors)} loaded, {len(sh)} expected)"
    for i, (name, shape, dt) in enumerate(sh):
        if not same_bits(reference(i, shape, dt, device), tensors[name]):
            return f"tensor {name!r} differs"
    return "ok"


def nbytes_of(size_bytes: int) -> int:
    return sum(torch.Size(s).numel() * torch.empty((), dtype=dt).element_size() for _, s, dt in shapes(size_bytes))


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- the page cache -----------------------------------------------------------------------------------------
def evict(path: str, how: str) -> str:
    """Drop the file from the page cache; returns the regime's name."""
    if how == "drop_caches":
        from gpuio_apps.bench.os_cache import drop_caches

        why = drop_caches()
        if why is None:
            return "cold (drop_caches)"
    from gpuio.safetensors import evict as drop_file

    drop_file(path)
    return "cold (fadvise DONTNEED of the file)"


def make_resident(path: str) -> float:
    """Read the file through the page cache until it is all there (the warm regime); its resident fraction."""
    from gpuio.safetensors import cached_fraction

    size, piece = os.path.getsize(path), 16 << 20

    def read_range(k: int) -> None:  # 8 readers, each a contiguous eighth: 8 sequential streams at the disk
        fd = os.open(path, os.O_RDONLY)
        try:
            for off in range(k * step, min(size, (k + 1) * step), piece):
                os.pread(fd, piece, off)
        finally:
            os.close(fd)

    from concurrent.futures import ThreadPoolExecutor

    step = -(-size // 8 // piece) * piece
    for _ in range(3):
        if cached_fraction(path) >= 1.0:
            break
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(read_range, range(8)))
    return cached_fraction(path)


# -- one method in its own process ---------------------------------------------------------------------------
def _base(method: str) -> str:
    """gpuio[threads=16] (a tuning variant, run with GPUIO_SAFETENSORS_THREADS=16) is gpuio."""
    return method.split("[")[0]


_ENGINE_VARIANT_KEYS = ("workers", "queue_depth")  # process-engine knobs a variant sets as they are (io_kib: in KiB)


def _variant_keys() -> tuple[str, ...]:
    """What a gpuio variant may set: the loader's knobs (gpuio.defaults' safetensors.*), io_kib and the process
    engine's _ENGINE_VARIANT_KEYS."""
    return tuple(k.key for k in defaults.knobs("safetensors")) + ("io_kib",) + _ENGINE_VARIANT_KEYS


def _variant_env(method: str) -> dict:
    if not method.startswith("gpuio["):
        return {}
    env = {}
    for k, v in (p.split("=") for p in method[method.index("[") + 1:-1].split(",")):
        k, v = k.strip().lower(), v.strip()
        if k == "io_kib":  # engine-wide knobs of the process engine
            env[defaults.knob("io_bytes_max").env] = str(int(v) << 10)
        elif k in _ENGINE_VARIANT_KEYS:
            env[defaults.knob(k).env] = v
        else:
            env[defaults.knob(f"safetensors.{k}").env] = v
    return env


def _load(method: str, path: str, device: torch.device, stats: dict) -> dict[str, torch.Tensor]:
    method = _base(method)
    if method == "gpuio":
        import gpuio.safetensors as gst

        return gst.load_file(path, device=device, stats=stats)
    if method == "safetensors":
        import safetensors.torch as sft

        return sft.load_file(path, device=str(device))
    if method == "fastsafetensors":
        from fastsafetensors import fastsafe_open

        with fastsafe_open(filenames=[path], nogds=True, device=str(device)) as f:
            return {k: f.get_tensor(k) for k in f.keys()}
    if method == "instanttensor":  # its defaults: URING O_DIRECT on a disk file, copy=True (tensors of their own)
        from instanttensor import safe_open

        out = {}
        with safe_open(path, framework="pt", device=device.index or 0) as f:
            for name, t in f.tensors():
                out[name] = t
            stats["data_path"] = f"instanttensor {f.backend.name}"
        return out
    if method == "runai":
        from runai_model_streamer import SafetensorsStreamer

        with SafetensorsStreamer() as s:
            s.stream_file(path, device=str(device))
            return {name: t.to(device) for name, t in s.get_tensors()}
    raise ValueError(f"method {method!r} is not one of {', '.join(METHODS)}")


def _imports(method: str, device: torch.device | None = None) -> str | None:
    """Import what the method needs (outside the clock); why not, when it cannot."""
    mod = {"gpuio": "gpuio.safetensors", "safetensors": "safetensors.torch", "fastsafetensors": "fastsafetensors",
           "runai": "runai_model_streamer", "instanttensor": "instanttensor"}[_base(method)]
    if mod == "instanttensor" and device is not None and device.type != "cuda":
        return "instanttensor loads into CUDA memory only"
    try:
        __import__(mod)
    except Exception as e:  # noqa: BLE001 - any import failure is a reason to skip the method
        return f"{mod} cannot be imported: {type(e).__name__}: {e}"
    return None


def start_cuda(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.init()
        torch.empty(1, device=device)
        torch.cuda.synchronize(device)


def _begin(spec: dict) -> tuple[str, str, torch.device, str | None]:
    """(method, path, device, why the method cannot run) of a child's spec, CUDA started where it runs."""
    method, path, device = spec["method"], spec["path"], torch.device(spec["device"])
    why = _imports(method, device)
    if not why:
        start_cuda(device)
    return method, path, device, why


def child_load(spec: dict) -> dict:
    from gpuio.safetensors import cached_fraction

    method, path, device, why = _begin(spec)
    if why:
        return {"skipped": why}
    # right before the clock, in this process: nothing else runs between the cache's preparation and the load
    regime = evict(path, spec["evict"]) if spec["cold"] else "warm"
    made = None if spec["cold"] else make_resident(path)
    resident = cached_fraction(path)
    stats: dict = {}
    sync(device)
    t0 = time.perf_counter()
    out = _load(method, path, device, stats)
    sync(device)
    seconds = time.perf_counter() - t0
    if _base(method) == "gpuio":  # after the clock: whether the pool's slots got the 2 MiB pages they asked for
        import gpuio.safetensors as gst

        stats["slot_huge_page_bytes"] = gst.staging(huge_pages=True)["huge_page_bytes"]
    misaligned = sum(1 for t in out.values() if t.data_ptr() % ALIGN)
    return {"seconds": seconds, "regime": regime, "resident_at_start": resident, "made_resident": made,
            "check": check(out, spec["size_bytes"], device), "misaligned": misaligned, "data_path": stats.get("data_path", ""),
            "gpuio_stats": {k: v for k, v in stats.items() if k != "data_path"}}


def child_save(spec: dict) -> dict:
    method, out, device, why = _begin(spec)
    if why:
        return {"skipped": why}
    tensors = model(spec["size_bytes"], device)
    if os.path.exists(out):
        os.unlink(out)
    stats: dict = {}
    sync(device)
    t0 = time.perf_counter()
    if method == "gpuio":
        import gpuio.safetensors as gst

        gst.save_file(tensors, out, stats=stats)
    else:
        import safetensors.torch as sft

        sft.save_file(tensors, out)
        fsync(out)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "data_path": stats.get("data_path", "")}


def child_verify(spec: dict) -> dict:
    """gpuio's saved file, loaded by each peer, bit for bit."""
    device = torch.device(spec["device"])
    start_cuda(device)
    out = {}
    for method in PEERS:
        why = _imports(method, device)
        out[method] = f"skipped: {why}" if why else check(_load(method, spec["path"], device, {}),
                                                         spec["size_bytes"], device)
    return out


def run_child(kind: str, spec: dict, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, json.dumps(spec)]
    return child_result(cmd, timeout, dict(os.environ, **_variant_env(spec.get("method", ""))))


def child_result(cmd: list[str], timeout: float, env: dict | None = None) -> dict:
    """Run one pass in a process of its own: the last JSON line it prints, or {"failed": why} in one line."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"failed": f"timed out after {timeout:.0f} s"}
    lines = [x for x in r.stdout.splitlines() if x.startswith("{")]
    if r.returncode != 0 or not lines:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return {"failed": f"exit {r.returncode}: {tail[:300]}"}
    return json.loads(lines[-1])


# -- references on the same file -----------------------------------------------------------------------------
RAW_SIZES = (128 << 10, 1 << 20)


def raw_grid(path: str, seconds: float) -> dict:
    """The raw reference grid on the file (gpuio_apps.bench, O_DIRECT sequential reads, no engine): each request
    size's best configuration over `seconds` samples. Short samples of the file's first blocks catch what the disk
    does not sustain over gigabytes (bursts; blocks a host cache below the virtual disk kept from the sample
    before), so they choose the configurations that then read the whole file (raw_methods); they are printed, not
    the reference."""
    from gpuio_apps.bench.measure import raw_best
    from gpuio_apps.bench.workloads import RAW_GRID

    out: dict = {}
    for req in RAW_SIZES:
        r, label = raw_best(path, req, sequential=True, write=False, seconds=seconds)
        if r:
            cfg = next(c for c in RAW_GRID if c.label == label)
            out[f"{req >> 10 if req < 1 << 20 else req >> 20} {'KiB' if req < 1 << 20 else 'MiB'} {label}"] = {
                "Bps": r["bytes"] / r["seconds"], "request_bytes": req, "uring": cfg.uring, "threads": cfg.threads,
                "queue_depth": cfg.queue_depth}
    return out


def raw_methods(grid: dict) -> dict[str, dict]:
    """The raw rows of the cold rotation: the grid's best configuration at each request size, and raw_file_pass's
    (1 MiB, one io_uring thread at QD 128), each reading the whole file once from a dropped cache, in its own
    process like the loads. The best of these passes is the disk's best sequential read rate the loads are
    judged against: the same bytes, sustained, at the same times."""
    from gpuio_apps.papers.common import RAW_FILE

    out = {f"raw[{k}]": {kk: v[kk] for kk in ("request_bytes", "uring", "threads", "queue_depth")}
           for k, v in grid.items()}
    qd = RAW_FILE["read_queue_depth"]
    file_pass = {"request_bytes": RAW_FILE["request_bytes"], "uring": True, "threads": 1, "queue_depth": qd}
    if file_pass not in out.values():
        out[f"raw[1 MiB uring 1thr QD{qd}]"] = file_pass
    return out


def child_raw(spec: dict) -> dict:
    """One raw pass over the whole file (each thread its contiguous share, front to back), after the same
    eviction as a cold load."""
    from gpuio_apps.papers.common import raw_whole_pass

    path, req, threads = spec["path"], spec["request_bytes"], spec["threads"]
    regime = evict(path, spec["evict"])
    r = raw_whole_pass(path, os.path.getsize(path), request_bytes=req, threads=threads,
                       queue_depth=spec["queue_depth"], uring=spec["uring"])
    return {"seconds": r["seconds"], "bytes": r["bytes"], "regime": regime, "request_bytes": req, "threads": threads}


def machine_facts(path: str) -> dict:
    """What bounds a load on this machine besides the disk's rate: transparent huge pages (the loader's slots
    and the raw reference's buffers ask for them) and the block queue of the device holding `path`."""
    def read(p: str) -> str:
        try:
            with open(p) as f:
                return f.read().strip()
        except OSError:
            return "?"

    facts = {f"thp_{k}": read(f"/sys/kernel/mm/transparent_hugepage/{k}") for k in ("enabled", "defrag")}
    dev = os.stat(path).st_dev
    queue = os.path.realpath(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if not os.path.isdir(os.path.join(queue, "queue")):
        queue = os.path.dirname(queue)  # a partition: its disk's queue
    facts["block_device"] = os.path.basename(queue)
    for k in ("max_sectors_kb", "max_segments", "nr_requests", "scheduler", "read_ahead_kb"):
        facts[k] = read(os.path.join(queue, "queue", k))
    return facts


def h2d_rate(device: torch.device) -> float:
    """Pinned host -> device copy rate (bytes/s, best of 3 copies of 1 GiB); 0 on the CPU."""
    if device.type != "cuda":
        return 0.0
    src = torch.empty(GIB, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(GIB, dtype=torch.uint8, device=device)
    best = float("inf")
    for _ in range(3):
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return GIB / best


# -- the run -------------------------------------------------------------------------------------------------
def rotated(xs, k: int) -> list:
    k %= len(xs)
    return list(xs[k:]) + list(xs[:k])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-gib", type=float, default=None, help="model file size (default 8 with CUDA, 0.25 without)")
    ap.add_argument("--dir", default="model_load_work", help="where the files go (a disk, not tmpfs)")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    ap.add_argument("--gpuio-variants", default="", help="extra gpuio rows with loader overrides, ';'-separated, "
                    "e.g. 'threads=16;io_kib=128,chunk_mib=8': keys " + ", ".join(_variant_keys()) + " (each set "
                    "through its gpuio.defaults variable in the pass's process)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--regimes", default="cold,warm", help="cold, warm or both (comma-separated)")
    ap.add_argument("--save-rounds", type=int, default=2, help="0: no save comparison")
    ap.add_argument("--evict", choices=("drop_caches", "fadvise"), default="drop_caches",
                    help="cold passes: drop the whole page cache (root) or only the file's pages")
    ap.add_argument("--raw-seconds", type=float, default=1.0, help="per raw reference configuration")
    ap.add_argument("--budget-s", type=float, default=480.0, help="start no new pass after this many seconds")
    ap.add_argument("--json", default=None, help="default: model_load.json in --dir")
    ap.add_argument("--keep", action="store_true", help="keep the model file (reused when its size matches)")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "SPEC"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        fn = {"load": child_load, "save": child_save, "verify": child_verify, "raw": child_raw}[a.child[0]]
        print(json.dumps(fn(json.loads(a.child[1]))), flush=True)
        return 0
    t_start = time.perf_counter()
    device = torch.device("cuda" if a.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if a.device == "auto" else a.device))
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", 0)
    methods = [m.strip() for m in a.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad or "gpuio" not in methods:
        ap.error(f"--methods {a.methods!r}: give gpuio and any of {', '.join(PEERS)}")
    keys = _variant_keys()
    for v in filter(None, (x.strip() for x in a.gpuio_variants.split(";"))):
        if any(kv.count("=") != 1 or kv.split("=")[0].strip().lower() not in keys for kv in v.split(",")):
            ap.error(f"--gpuio-variants {v!r}: give {', '.join(k + '=N' for k in keys)}, comma-separated")
        methods.insert(methods.index("gpuio") + 1, f"gpuio[{v}]")
    regimes = [r.strip() for r in a.regimes.split(",") if r.strip()]
    if not regimes or any(r not in ("cold", "warm") for r in regimes):
        ap.error(f"--regimes {a.regimes!r}: give cold, warm or cold,warm")
    size_bytes = int((a.size_gib if a.size_gib is not None else (8.0 if device.type == "cuda" else 0.25)) * GIB)
    os.makedirs(a.dir, exist_ok=True)
    path = os.path.join(os.path.abspath(a.dir), "model.safetensors")
    nbytes = nbytes_of(size_bytes)
    need = 3.1 * nbytes - (os.path.getsize(path) if os.path.exists(path) else 0)  # model, two saves at once
    free = shutil.disk_usage(a.dir).free
    if free < need:
        ap.error(f"--dir {a.dir!r} has {free / GIB:.1f} GiB free; --size-gib {size_bytes / GIB:g} needs "
                 f"{need / GIB:.1f} (the model and two saved copies at once)")
    if not (a.keep and os.path.exists(path) and os.path.getsize(path) > nbytes):
        import safetensors.torch as sft

        t0 = time.perf_counter()
        tensors = model(size_bytes, device)
        sft.save_file(tensors, path)
        fsync(path)
        del tensors
        if device.type == "cuda":
            torch.cuda.empty_cache()  # the children need the GPU memory the generation held
        print(f"wrote {path}: {nbytes / GIB:.2f} GiB of tensors in {time.perf_counter() - t0:.1f} s "
              "(safetensors.torch.save_file, fsynced)", flush=True)
    facts = machine_facts(path)
    from gpuio_apps.bench.fastdev import storage_of

    facts["storage"] = storage_of(path)  # the disk, or the fast device (GPUIO_DEVICE=fast)
    print("machine: " + ", ".join(f"{k} {v}" for k, v in facts.items()), flush=True)
    grid = raw_grid(path, a.raw_seconds)
    raws = raw_methods(grid)
    res: dict = {"bytes": nbytes, "file_bytes": os.path.getsize(path), "tensors": len(shapes(size_bytes)),
                 "device": str(device), "raw_grid": grid, "raw": {}, "raw_best_Bps": 0.0, "paired_cold_raw": [],
                 "raw_grid_best_Bps": max((v["Bps"] for v in grid.values()), default=0.0),
                 "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "host",
                 "h2d_Bps": h2d_rate(device), "loads": {}, "saves": {}, "verify": {}, "gpuio_data_path": {},
                 "raw_write_Bps": 0.0, "bytes_saved": nbytes, "passes": [], "rounds_done": 0, "machine": facts,
                 "storage": facts["storage"], "align": ALIGN}
    timeout = 120 + 4 * nbytes / 1e9
    raw_runs: dict[str, list[tuple[int, float]]] = {m: [] for m in raws}  # (round, bytes/s)

    def raw_pass(m: str, cfg: dict, rnd: int) -> None:
        r = run_child("raw", {"path": path, "evict": a.evict, **cfg}, timeout)
        res["passes"].append({"round": rnd, "method": m, "kind": "cold", **r})
        if "seconds" not in r:
            print(f"{m}: {r}", flush=True)
            return
        raw_runs[m].append((rnd, r["bytes"] / r["seconds"]))
        print(f"round {rnd} cold {m:<34} {r['seconds']:8.3f} s  {r['bytes'] / r['seconds'] / 1e9:6.2f} GB/s  "
              f"({r['bytes'] / GIB:.2f} GiB, O_DIRECT, the whole file once)", flush=True)

    runs = {m: {"cold": [], "warm": []} for m in methods}
    info: dict[str, dict] = {m: {"check": "ok", "regime": "", "misaligned": 0} for m in methods}
    over = lambda: time.perf_counter() - t_start > a.budget_s  # noqa: E731
    for rnd in range(a.rounds):
        if over():
            print(f"budget of {a.budget_s:.0f} s reached: {rnd} round(s) done", flush=True)
            break
        for regime in regimes:
            for m in rotated(methods + (list(raws) if regime == "cold" else []), rnd):
                if m in raws:
                    if not (rnd and over()):
                        raw_pass(m, raws[m], rnd)
                    continue
                if "skipped" in info[m] or (rnd and over()):  # round 0 always completes
                    continue
                r = run_child("load", {"method": m, "path": path, "device": str(device), "cold": regime == "cold",
                                       "evict": a.evict, "size_bytes": size_bytes}, timeout)
                res["passes"].append({"round": rnd, "method": m, "kind": regime, **r})
                if "skipped" in r or "failed" in r:
                    info[m].update(r)
                    print(f"{m}: {'skipped: ' + r['skipped'] if 'skipped' in r else 'FAILED: ' + r['failed']}", flush=True)
                    continue
                runs[m][regime].append(r["seconds"])
                info[m]["misaligned"] = max(info[m]["misaligned"], r["misaligned"])
                if r["check"] != "ok":
                    info[m]["check"] = r["check"]
                if regime == "cold":
                    info[m]["regime"] = r["regime"]
                if m == "gpuio":
                    res["gpuio_data_path"][regime] = r["data_path"]
                g = r["gpuio_stats"]
                slots = (f"  slots {g['slots']} ({g['slot_huge_page_bytes'] >> 20} MiB in 2 MiB pages); setup "
                         f"{g['setup_s']:.3f} s, reads {g['read_s']:.3f} s, copies after {g['tail_s']:.3f} s" if g else "")
                print(f"round {rnd} {regime:<4} {m:<22} {r['seconds']:8.3f} s  {nbytes / r['seconds'] / 1e9:6.2f} GB/s"
                      f"  resident at start {r['resident_at_start']:.2f}"
                      + (f" (made {r['made_resident']:.2f})" if r.get("made_resident") is not None else "")
                      + f"  check {r['check']}  {r['data_path']}{slots}", flush=True)
        res["rounds_done"] = rnd + 1
    for m, got in raw_runs.items():
        rates = [b for _, b in got]
        res["raw"][m] = {"Bps": max(rates, default=0.0), "median_Bps": statistics.median(rates) if rates else 0.0,
                         "n": len(rates), "config": m[4:-1]}
    res["raw_best_Bps"] = max((v["Bps"] for v in res["raw"].values()), default=0.0)
    for p in res["passes"]:  # each round's gpuio cold rate over the best raw pass of the same round
        if p["method"] == "gpuio" and p["kind"] == "cold" and "seconds" in p:
            same = [b for runs_ in raw_runs.values() for rnd, b in runs_ if rnd == p["round"]]
            if same:
                res["paired_cold_raw"].append(nbytes / p["seconds"] / max(same))
    for m in methods:
        res["loads"][m] = ({"skipped": info[m]["skipped"]} if "skipped" in info[m] else
                           {"cold": summary(runs[m]["cold"], nbytes), "warm": summary(runs[m]["warm"], nbytes),
                            "check": info[m]["check"], "regime": info[m]["regime"] or "-",
                            "misaligned": info[m]["misaligned"],
                            "failed": info[m].get("failed"), "cold_s": runs[m]["cold"], "warm_s": runs[m]["warm"]})
    saved = os.path.join(os.path.abspath(a.dir), "saved-gpuio.safetensors")
    save_runs: dict[str, list[float]] = {m: [] for m in SAVERS}
    for rnd in range(a.save_rounds):
        if rnd and over():
            print(f"budget of {a.budget_s:.0f} s reached: {rnd} save round(s) done", flush=True)
            break
        for m in rotated(SAVERS, rnd):
            out = saved if m == "gpuio" else os.path.join(os.path.abspath(a.dir), "saved-safetensors.safetensors")
            r = run_child("save", {"method": m, "path": out, "device": str(device), "size_bytes": size_bytes}, timeout)
            res["passes"].append({"round": rnd, "method": m, "kind": "save", **r})
            if "seconds" in r:
                save_runs[m].append(r["seconds"])
                print(f"round {rnd} save {m:<22} {r['seconds']:8.3f} s  {nbytes / r['seconds'] / 1e9:6.2f} GB/s  "
                      f"{r['data_path']}", flush=True)
            else:
                print(f"save {m}: {r}", flush=True)
            if m == "safetensors" and os.path.exists(out):
                os.unlink(out)
    res["saves"] = {m: summary(v, nbytes) for m, v in save_runs.items() if v}
    if os.path.exists(saved):
        res["verify"] = run_child("verify", {"path": saved, "device": str(device), "size_bytes": size_bytes}, timeout * 3)
        os.unlink(saved)
        from gpuio_apps.papers.common import raw_first_write

        scratch = saved + ".raw"  # the like of gpuio's save: a new preallocated file written once, to fdatasync
        res["raw_write_Bps"] = raw_first_write(scratch, nbytes).get("raw_first_write_Bps", 0.0)
        os.unlink(scratch)
    res["ratios"] = ratios(res)
    res["seconds"] = time.perf_counter() - t_start
    lines = report(res)
    print("\n".join(lines), flush=True)
    js = a.json or os.path.join(a.dir, "model_load.json")
    with open(js, "w") as f:
        json.dump(res, f, indent=1, default=str)
    print(f"json: {js}; total {res['seconds']:.0f} s")
    if not a.keep:
        os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
