"""Several GPUs loading one sharded checkpoint (a tensor-parallel start), gpuio beside safetensors and
InstantTensor. The model of benchmarks/model_load.py, written by `safetensors.torch.save_file` as --shards files
with a Hugging Face index (`model.safetensors.index.json`). --pattern share: rank r of --ranks takes a share of
the tensors (largest first, each to the rank with the fewest bytes: about 1/ranks of the bytes) onto cuda:r;
--pattern all: every rank takes all of them.
  gpuio               gpuio.safetensors.load_file(index, device=cuda:r, tensors=its names): each rank on its own
  gpuio-dist          the same with process_group= (NCCL; gloo on the CPU): the ranks split the reads, each byte
                      read once, and send each other the rest
  safetensors         safetensors.safe_open(shard, device=cuda:r).get_tensor(name) for its names, shard by shard
  instanttensor-dist  instanttensor.safe_open(shards, device=r, process_group=WORLD).tensors() (--pattern all
                      only: InstantTensor with a group gives every rank every tensor; needs CUDA)
The dist methods' process group (and its NCCL communicators) starts before the clock, as in an engine that
loads its weights after its ranks are up.
All ranks start together (each imports and starts CUDA, then waits for the parent's go after the cache is
dropped); a pass takes from the first rank's start to the last rank's end. Every tensor is checked bit for bit
(references generated on each rank's GPU: the GPUs must be of one model). Cold and warm, --rounds rounds.

    python3 benchmarks/model_load_ranks.py --ranks 2 --size-gib 8 --dir /var/tmp/ml-ranks   # 2 GPUs, as root
    python3 benchmarks/model_load_ranks.py --ranks 2 --size-gib 0.02 --device cpu --evict fadvise  # CPU check
    python3 benchmarks/model_load_ranks.py --ranks 8 --pattern all --dir /var/tmp/ml-ranks   # 8 GPUs, all of it
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_load as ml  # noqa: E402

METHODS = ("gpuio", "gpuio-dist", "safetensors", "instanttensor-dist")
DIST = ("gpuio-dist", "instanttensor-dist")  # methods that load through a process group


def write_sharded(folder: str, size_bytes: int, shards: int, device: torch.device) -> str:
    import safetensors.torch as sft

    sh = ml.shapes(size_bytes)
    per = -(-len(sh) // shards)
    weight_map = {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {name: ml.reference(i, shape, dt, device) for i, (name, shape, dt) in enumerate(sh)
                if i // per == s}
        sft.save_file(part, os.path.join(folder, fname))
        ml.fsync(os.path.join(folder, fname))
        weight_map.update({n: fname for n in part})
    index = os.path.join(folder, "model.safetensors.index.json")
    with open(index, "w") as f:
        json.dump({"metadata": {"total_size": ml.nbytes_of(size_bytes)}, "weight_map": weight_map}, f)
    return index


def share(size_bytes: int, rank: int, ranks: int) -> list[tuple[int, str, tuple, torch.dtype]]:
    """Rank's tensors: largest first, each to the rank with the fewest bytes so far (about 1/ranks of the bytes
    and of every shard)."""
    sh = list(enumerate(ml.shapes(size_bytes)))
    size = {i: torch.Size(s).numel() * torch.empty((), dtype=dt).element_size() for i, (_, s, dt) in sh}
    load, owner = [0] * ranks, {}
    for i, _ in sorted(sh, key=lambda x: (-size[x[0]], x[0])):
        r = min(range(ranks), key=lambda k: (load[k], k))
        owner[i] = r
        load[r] += size[i]
    return [(i, n, s, dt) for i, (n, s, dt) in sh if owner[i] == rank]


def _start_group(spec: dict, device: torch.device):
    """The ranks' process group (NCCL on GPUs, gloo on the CPU), its communicators made by one exchange between
    every pair of ranks before the clock starts."""
    import datetime

    import torch.distributed as dist

    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=spec["init"],
                            rank=spec["rank"], world_size=spec["ranks"], timeout=datetime.timedelta(seconds=300))
    rank, ranks = spec["rank"], spec["ranks"]
    ops = []
    for q in range(ranks):
        if q != rank:
            ops.append(dist.P2POp(dist.isend, torch.ones(1, device=device), q))
            ops.append(dist.P2POp(dist.irecv, torch.empty(1, device=device), q))
    dist.barrier()
    for w in dist.batch_isend_irecv(ops) if ops else []:
        w.wait()
    dist.barrier()
    return dist.group.WORLD


def child(spec: dict) -> dict:
    rank, ranks, index, method = spec["rank"], spec["ranks"], spec["index"], spec["method"]
    device = torch.device(spec["device"])
    if spec["pattern"] == "all":
        mine = [(i, n, s, dt) for i, (n, s, dt) in enumerate(ml.shapes(spec["size_bytes"]))]
    else:
        mine = share(spec["size_bytes"], rank, ranks)
    names = [n for _, n, _, _ in mine]
    import gpuio.safetensors as gst
    import safetensors

    ml.start_cuda(device)
    group = _start_group(spec, device) if method in DIST else None
    with open(f"{spec['go']}.ready{rank}", "w"):
        pass
    deadline = time.time() + 120
    while not os.path.exists(spec["go"]):
        if time.time() > deadline:
            return {"failed": "no go from the parent in 120 s"}
        time.sleep(0.001)
    stats: dict = {}
    t0 = time.time()
    if method == "gpuio":
        out = gst.load_file(index, device=device, tensors=names, stats=stats)
    elif method == "gpuio-dist":
        out = gst.load_file(index, device=device, tensors=names, stats=stats, process_group=group)
    elif method == "instanttensor-dist":
        import instanttensor

        with open(index) as f:
            folder, shards = os.path.dirname(index), list(dict.fromkeys(json.load(f)["weight_map"].values()))
        with instanttensor.safe_open([os.path.join(folder, s) for s in shards], framework="pt",
                                     device=device.index, process_group=group) as f:
            keep = set(names)
            out = {n: t for n, t in f.tensors() if n in keep}
    else:
        with open(index) as f:
            wm = json.load(f)["weight_map"]
        folder, out = os.path.dirname(index), {}
        for fname in dict.fromkeys(wm[n] for n in names):
            with safetensors.safe_open(os.path.join(folder, fname), framework="pt", device=str(device)) as f:
                out.update({n: f.get_tensor(n) for n in names if wm[n] == fname})
    ml.sync(device)
    t1 = time.time()
    bad = next((n for i, n, s, dt in mine if not ml.same_bits(ml.reference(i, s, dt, device), out[n])), None)
    if group is not None:
        import torch.distributed as dist

        dist.destroy_process_group()
    return {"t0": t0, "t1": t1, "bytes": sum(t.numel() * t.element_size() for t in out.values()),
            "check": "ok" if bad is None and len(out) == len(names) else f"tensor {bad!r} differs",
            "data_path": stats.get("data_path", ""), "bytes_read": stats.get("bytes_read")}


def one_pass(a, method: str, index: str, files: list[str], cold: bool, size_bytes: int) -> dict:
    go = os.path.join(a.dir, f"go-{os.getpid()}-{time.monotonic_ns()}")
    procs = []
    init = f"tcp://127.0.0.1:{_free_port()}"
    for r in range(a.ranks):
        dev = "cpu" if a.device == "cpu" else f"cuda:{r}"
        spec = {"rank": r, "ranks": a.ranks, "index": index, "method": method, "device": dev, "go": go,
                "size_bytes": size_bytes, "pattern": a.pattern, "init": init}
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline = time.time() + 180
    while not all(os.path.exists(f"{go}.ready{r}") for r in range(a.ranks)) and time.time() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.01)
    regime = "warm"
    if cold:
        regime = ml.evict(files[0], a.evict)
        for f in files[1:]:
            ml.evict(f, "fadvise")
    else:
        for f in files:
            ml.make_resident(f)
    with open(go, "w"):
        pass
    res = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        lines = [x for x in out.splitlines() if x.startswith("{")]
        res.append(json.loads(lines[-1]) if lines else {"failed": (err.strip().splitlines() or ["?"])[-1][:300]})
    for r in range(a.ranks):
        os.unlink(f"{go}.ready{r}") if os.path.exists(f"{go}.ready{r}") else None
    os.unlink(go)
    failed = [r.get("failed") for r in res if "failed" in r]
    if failed:
        return {"failed": failed[0], "regime": regime}
    return {"seconds": max(r["t1"] for r in res) - min(r["t0"] for r in res), "regime": regime,
            "check": "ok" if all(r["check"] == "ok" for r in res) else "; ".join(r["check"] for r in res),
            "rank_seconds": [r["t1"] - r["t0"] for r in res], "data_path": [r["data_path"] for r in res],
            "bytes_read": [r.get("bytes_read") for r in res]}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def methods_of(a) -> tuple[list[str], list[str]]:
    """The methods asked for that can run here, and a note for each left out."""
    asked = [m.strip() for m in a.methods.split(",") if m.strip()]
    bad = [m for m in asked if m not in METHODS]
    if bad or not asked:
        raise SystemExit(f"model_load_ranks: error: --methods {a.methods!r}: choose from {', '.join(METHODS)}")
    notes, out = [], []
    for m in asked:
        if m == "instanttensor-dist":
            why = ("it needs CUDA" if a.device != "cuda" else
                   "with a group it gives every rank every tensor (--pattern all)" if a.pattern != "all" else
                   "instanttensor is not installed" if not _importable("instanttensor") else "")
            if why:
                notes.append(f"{m} left out: {why}")
                continue
        out.append(m)
    return out, notes


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _ratio_lines(summary: dict, methods: list[str]) -> list[str]:
    """Per regime: every method's best time, then gpuio-dist and gpuio against each peer (peer's time / ours)."""
    lines = []
    pairs = [("gpuio", "safetensors"), ("gpuio-dist", "safetensors"), ("gpuio-dist", "gpuio"),
             ("gpuio-dist", "instanttensor-dist"), ("gpuio", "instanttensor-dist")]
    for regime in ("cold", "warm"):
        best = {m: summary[m][regime] for m in methods if regime in summary.get(m, {})}
        if not best:
            continue
        rs = [f"{x} / {y} {best[y]['best_s'] / best[x]['best_s']:.2f} x (median "
              f"{best[y]['median_s'] / best[x]['median_s']:.2f} x)" for x, y in pairs if x in best and y in best]
        times = ", ".join(f"{m} {b['best_s']:.3f} s" for m, b in best.items())
        lines.append(f"{regime}: {times}" + (f": {'; '.join(rs)}" if rs else ""))
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--size-gib", type=float, default=8.0)
    ap.add_argument("--dir", default="model_load_ranks_work")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--evict", choices=("drop_caches", "fadvise"), default="drop_caches")
    ap.add_argument("--pattern", choices=("share", "all"), default="share",
                    help="share: each rank takes about 1/ranks of the tensors; all: every rank takes all of them")
    ap.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, of {', '.join(METHODS)}")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(json.loads(a.child))), flush=True)
        return 0
    if a.device == "cuda" and torch.cuda.device_count() < a.ranks:
        print(f"model_load_ranks: skipped: {a.ranks} ranks need {a.ranks} GPUs, torch sees "
              f"{torch.cuda.device_count()}")
        return 0
    methods, notes = methods_of(a)
    for n in notes:
        print(f"model_load_ranks: {n}")
    os.makedirs(a.dir, exist_ok=True)
    a.dir = os.path.abspath(a.dir)
    size_bytes = int(a.size_gib * ml.GIB)
    gen = torch.device("cuda", 0) if a.device == "cuda" else torch.device("cpu")
    index = write_sharded(a.dir, size_bytes, a.shards, gen)
    if gen.type == "cuda":
        torch.cuda.empty_cache()
    with open(index) as f:
        files = [os.path.join(a.dir, n) for n in dict.fromkeys(json.load(f)["weight_map"].values())]
    nbytes = ml.nbytes_of(size_bytes)
    runs: dict = {m: {"cold": [], "warm": []} for m in methods}
    passes = []
    for rnd in range(a.rounds):
        for regime in ("cold", "warm"):
            for m in ml.rotated(methods, rnd):
                r = one_pass(a, m, index, files, regime == "cold", size_bytes)
                passes.append({"round": rnd, "method": m, "kind": regime, **r})
                if "seconds" in r and r["check"] == "ok":
                    runs[m][regime].append(r["seconds"])
                print(f"round {rnd} {regime:<4} {m:<18} " + (
                    f"{r['seconds']:.3f} s  {nbytes / r['seconds'] / 1e9:.2f} GB/s  ranks "
                    f"{', '.join(f'{s:.3f}' for s in r['rank_seconds'])} s  check {r['check']}  {r['regime']}"
                    if "seconds" in r else f"FAILED: {r['failed']}"), flush=True)
    summary = {m: {k: {"best_s": min(v), "median_s": statistics.median(v)} for k, v in runs[m].items() if v}
               for m in methods}
    what = f"each loading 1/{a.ranks} of the tensors" if a.pattern == "share" else "each loading all the tensors"
    print(f"model_load_ranks: {nbytes / ml.GIB:.2f} GiB in {a.shards} shards + index, {a.ranks} ranks {what} onto "
          f"its own {'GPU' if a.device == 'cuda' else 'CPU'}")
    for line in _ratio_lines(summary, methods):
        print(line)
    for m in ("gpuio", "gpuio-dist"):
        dp = [p for p in passes if p["method"] == m and "data_path" in p]
        if dp:
            print(f"{m} data path, last pass: {dp[-1]['data_path']}"
                  + (f"; bytes read per rank {dp[-1]['bytes_read']}" if m == "gpuio-dist" else ""))
    js = a.json or os.path.join(a.dir, "model_load_ranks.json")
    with open(js, "w") as f:
        json.dump({"bytes": nbytes, "ranks": a.ranks, "shards": a.shards, "pattern": a.pattern, "methods": methods,
                   "notes": notes, "passes": passes, "summary": summary}, f, indent=1)
    for f in files + [index]:
        os.unlink(f)
    print(f"json: {js}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
