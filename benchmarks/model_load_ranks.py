"""Several GPUs, each rank loading its share of a sharded checkpoint (a tensor-parallel start), gpuio beside
safetensors. The model of benchmarks/model_load.py, written by `safetensors.torch.save_file` as --shards files
with a Hugging Face index (`model.safetensors.index.json`); rank r of --ranks takes a share of the tensors
(largest first, each to the rank with the fewest bytes: about 1/ranks of the bytes) onto cuda:r:
  gpuio        gpuio.safetensors.load_file(index, device=cuda:r, tensors=its names)
  safetensors  safetensors.safe_open(shard, device=cuda:r).get_tensor(name) for its names, shard by shard
All ranks start together (each imports and starts CUDA, then waits for the parent's go after the cache is
dropped); a pass takes from the first rank's start to the last rank's end. Every tensor is checked bit for bit
(references generated on each rank's GPU: the GPUs must be of one model). Cold and warm, --rounds rounds.

    python3 benchmarks/model_load_ranks.py --ranks 2 --size-gib 8 --dir /var/tmp/ml-ranks   # 2 GPUs, as root
    python3 benchmarks/model_load_ranks.py --ranks 2 --size-gib 0.02 --device cpu --evict fadvise  # CPU check
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

METHODS = ("gpuio", "safetensors")


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


def child(spec: dict) -> dict:
    rank, ranks, index, method = spec["rank"], spec["ranks"], spec["index"], spec["method"]
    device = torch.device(spec["device"])
    mine = share(spec["size_bytes"], rank, ranks)
    names = [n for _, n, _, _ in mine]
    import gpuio.safetensors as gst
    import safetensors

    ml.start_cuda(device)
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
    return {"t0": t0, "t1": t1, "bytes": sum(t.numel() * t.element_size() for t in out.values()),
            "check": "ok" if bad is None and len(out) == len(names) else f"tensor {bad!r} differs",
            "data_path": stats.get("data_path", "")}


def one_pass(a, method: str, index: str, files: list[str], cold: bool, size_bytes: int) -> dict:
    go = os.path.join(a.dir, f"go-{os.getpid()}-{time.monotonic_ns()}")
    procs = []
    for r in range(a.ranks):
        dev = "cpu" if a.device == "cpu" else f"cuda:{r}"
        spec = {"rank": r, "ranks": a.ranks, "index": index, "method": method, "device": dev, "go": go,
                "size_bytes": size_bytes}
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
            "rank_seconds": [r["t1"] - r["t0"] for r in res], "data_path": [r["data_path"] for r in res]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--size-gib", type=float, default=8.0)
    ap.add_argument("--dir", default="model_load_ranks_work")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--evict", choices=("drop_caches", "fadvise"), default="drop_caches")
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
    runs: dict = {m: {"cold": [], "warm": []} for m in METHODS}
    passes = []
    for rnd in range(a.rounds):
        for regime in ("cold", "warm"):
            for m in ml.rotated(METHODS, rnd):
                r = one_pass(a, m, index, files, regime == "cold", size_bytes)
                passes.append({"round": rnd, "method": m, "kind": regime, **r})
                if "seconds" in r and r["check"] == "ok":
                    runs[m][regime].append(r["seconds"])
                print(f"round {rnd} {regime:<4} {m:<12} " + (
                    f"{r['seconds']:.3f} s  {nbytes / r['seconds'] / 1e9:.2f} GB/s  ranks "
                    f"{', '.join(f'{s:.3f}' for s in r['rank_seconds'])} s  check {r['check']}  {r['regime']}"
                    if "seconds" in r else f"FAILED: {r['failed']}"), flush=True)
    summary = {m: {k: {"best_s": min(v), "median_s": statistics.median(v)} for k, v in runs[m].items() if v}
               for m in METHODS}
    print(f"model_load_ranks: {nbytes / ml.GIB:.2f} GiB in {a.shards} shards + index, {a.ranks} ranks each "
          f"loading 1/{a.ranks} of the tensors onto its own {'GPU' if a.device == 'cuda' else 'CPU'}")
    for regime in ("cold", "warm"):
        g, s = summary["gpuio"].get(regime), summary["safetensors"].get(regime)
        if g and s:
            print(f"{regime}: gpuio {g['best_s']:.3f} s, safetensors {s['best_s']:.3f} s: gpuio / safetensors "
                  f"{s['best_s'] / g['best_s']:.2f} x (median {s['median_s'] / g['median_s']:.2f} x)")
    dp = [p["data_path"] for p in passes if p["method"] == "gpuio" and "data_path" in p]
    if dp:
        print(f"gpuio data path, last pass: {dp[-1]}")
    js = a.json or os.path.join(a.dir, "model_load_ranks.json")
    with open(js, "w") as f:
        json.dump({"bytes": nbytes, "ranks": a.ranks, "shards": a.shards, "passes": passes, "summary": summary}, f,
                  indent=1)
    for f in files + [index]:
        os.unlink(f)
    print(f"json: {js}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
