"""A transformers model ready on the GPU: gpuio.safetensors.from_pretrained beside model_class.from_pretrained.

The model is generated here (no downloads): a Llama-shaped config for --params-b billion parameters (hidden size
h a multiple of 128, h/128 layers and heads, MLP 8/3 h, vocabulary 32000, embeddings tied), random init in bf16,
written by save_pretrained sharded (a quarter of it a shard, at most: about 4 shards and
model.safetensors.index.json). Then each method in its own
process (imports and CUDA start outside the clock), the clock running from the call to a model whose every
parameter and buffer is on the device (`device_map=<device>`, synchronized):
  cold   the page cache dropped right before the load (`sync; echo 3 > /proc/sys/vm/drop_caches`: root; else
         posix_fadvise(DONTNEED) of the files, said in the regime)
  warm   the files wholly in the page cache
in --rounds rounds, the methods' order rotated each round (benchmarks/model_load.py's helpers). Each load's
logits on fixed tokens are hashed (bit-identical between the methods or the row says so) and its misaligned
tensors counted (data_ptr % 256 != 0). One table (best and median seconds, transformers / gpuio) and JSON (--json).

    python3 benchmarks/hf_load.py --params-b 3 --dir /var/tmp/hf      # GPU machine (as root: cold)
    python3 benchmarks/hf_load.py --device cpu --rounds 1             # a small smoke run
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import shutil
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_load import child_result, evict, make_resident, rotated, start_cuda, sync  # noqa: E402

METHODS = ("gpuio", "transformers")
READ_ALONE = "gpuio-read"  # --read-alone: load_file of the same checkpoint onto the device, no model (a diagnostic)
ALIGN = 256
VOCAB = 32000
TOKENS = [1, 17, 423, 9, 3021, 77, 5, 12000, 31999, 2, 640, 88]


def shape_for(params_b: float) -> dict:
    """The Llama config's sizes for about params_b billion parameters (at least 2 layers of 128)."""
    h = 128
    while True:
        layers, inter = max(2, h // 128), max(128, round(8 * h / 3 / 128) * 128)
        n = layers * (4 * h * h + 3 * h * inter + 2 * h) + VOCAB * h + h
        if n >= params_b * 1e9 or h >= 16384:
            return {"hidden_size": h, "num_hidden_layers": layers, "intermediate_size": inter,
                    "num_attention_heads": max(1, h // 128), "num_key_value_heads": max(1, h // 128),
                    "params": n}
        h += 128


def generate(d: str, params_b: float, device: torch.device) -> dict:
    """Write the model to d (reused where its record says the same size); its shape."""
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = shape_for(params_b)
    record = os.path.join(d, "hf_load.json")
    if os.path.exists(record) and json.load(open(record)) == shape:
        return shape
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    sizes = {k: v for k, v in shape.items() if k != "params"}
    cfg = LlamaConfig(vocab_size=VOCAB, max_position_embeddings=4096, tie_word_embeddings=True, **sizes)
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # the parameters made (and initialised) in bf16, on the device
    try:
        with torch.device(device):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(default)
    nbytes = shape["params"] * 2
    model.save_pretrained(d, max_shard_size=max(64 << 10, nbytes // 4 + 1))
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    os.sync()
    json.dump(shape, open(record, "w"))
    return shape


def files_of(d: str) -> list[str]:
    return sorted(glob.glob(os.path.join(d, "*.safetensors")))


def cold(d: str, how: str) -> str:
    files = files_of(d)
    regime = evict(files[0], how)
    for f in files[1:]:  # drop_caches took them all; fadvise takes one file at a time
        evict(f, "fadvise")
    return regime


def child_load(spec: dict) -> dict:
    import transformers
    from transformers import LlamaForCausalLM

    import gpuio.safetensors as gst

    d, device = spec["dir"], torch.device(spec["device"])
    import importlib.util

    if importlib.util.find_spec("accelerate") is None:
        raise SystemExit("transformers' device_map= needs accelerate, which this Python lacks (pip install accelerate, "
                         "or its wheel in .whl/ on the GPU machine)")
    start_cuda(device)
    if spec["cold"]:
        regime = cold(d, spec["evict"])
    else:
        regime = "warm"
        for f in files_of(d):
            make_resident(f)
    from gpuio.safetensors import cached_fraction

    resident = cached_fraction(os.path.join(d, "model.safetensors.index.json"))
    parts: dict = {}
    t0 = time.perf_counter()
    if spec["method"] == READ_ALONE:  # the checkpoint's read by itself: no model, nothing built beside it
        state = gst.load_file(d, device=device, stats=parts)
        sync(device)
        seconds = time.perf_counter() - t0
        return {"seconds": seconds, "regime": regime, "resident": resident, "logits": "-",
                "misaligned": sum(1 for t in state.values() if t.data_ptr() % ALIGN), "tensors": len(state),
                "read_alone_s": parts.get("read_s", seconds), "setup_s": parts.get("setup_s", 0.0),
                "calls_max": parts.get("calls_max", 0), "data_path": parts.get("data_path", "")}
    if spec["method"] == "gpuio":
        model = gst.from_pretrained(LlamaForCausalLM, d, device_map=str(device), stats=parts)
    else:
        model = LlamaForCausalLM.from_pretrained(d, device_map=str(device))
    sync(device)
    seconds = time.perf_counter() - t0
    tensors = list(model.parameters()) + list(model.buffers())
    wrong = [t for t in tensors if t.device != device]
    with torch.no_grad():
        logits = model(torch.tensor([TOKENS], device=device)).logits
    digest = hashlib.sha256(logits.float().cpu().numpy().tobytes()).hexdigest()[:16]
    return {"seconds": seconds, "regime": regime, "resident": resident, "logits": digest,
            "misaligned": sum(1 for t in tensors if t.data_ptr() % ALIGN), "tensors": len(tensors),
            "off_device": len(wrong), "dtype": str(model.dtype), "transformers": transformers.__version__,
            # gpuio's parts (from_pretrained's stats=): the read beside transformers' build, then the wait for it
            **{k: parts[k] for k in ("read_s", "build_s", "wait_s", "settle_s", "rebuilt", "data_path") if k in parts}}


def _parts(r: dict) -> str:
    """gpuio's parts of a load, e.g. '; read 0.21 s beside build 0.15 s, waited 0.06 s'."""
    if "read_alone_s" in r:
        return (f"; the read alone: {r['read_alone_s']:.2f} s after {r['setup_s']:.3f} s planning, "
                f"{r['calls_max']} calls at once, {r['data_path']}")
    if "read_s" not in r:
        return ""
    return (f"; read {r['read_s']:.2f} s beside build {r['build_s']:.2f} s, waited {r['wait_s']:.2f} s"
            + (", built again" if r.get("rebuilt") else ""))


def run_child(spec: dict, timeout: float) -> dict:
    return child_result([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)], timeout)


def table(res: dict) -> list[str]:
    out = [f"{'regime':<6} {'method':<13} {'best s':>8} {'median s':>9} {'misaligned':>11}  logits"]
    for regime, by in res["passes"].items():
        best = {}
        for m in METHODS + ((READ_ALONE,) if READ_ALONE in by else ()):
            ok = [p for p in by.get(m, []) if "seconds" in p]
            if not ok:
                fails = [p.get("failed") for p in by.get(m, [])]
                out.append(f"{regime:<6} {m:<13} {'-':>8} {'-':>9} {'-':>11}  {fails[:1]}")
                continue
            secs = [p["seconds"] for p in ok]
            best[m] = min(secs)
            digests = {p["logits"] for p in ok}
            out.append(f"{regime:<6} {m:<13} {min(secs):8.2f} {statistics.median(secs):9.2f} "
                       f"{max(p['misaligned'] for p in ok):>11}  {','.join(sorted(digests))}")
        if "gpuio" in best and "transformers" in best:
            digests = {p["logits"] for m in METHODS for p in by.get(m, []) if "logits" in p}
            same = "bit-identical" if len(digests) == 1 else "DIFFER"
            out.append(f"{regime}: gpuio {best['gpuio']:.2f} s vs transformers {best['transformers']:.2f} s: "
                       f"{best['transformers'] / best['gpuio']:.2f} x (logits {same})")
        if READ_ALONE in best and "gpuio" in best:
            out.append(f"{regime}: the read alone {best[READ_ALONE]:.2f} s ({res['bytes'] / best[READ_ALONE] / 1e9:.1f} GB/s), "
                       f"gpuio's whole load {best['gpuio']:.2f} s")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params-b", type=float, default=0.05, help="billions of parameters (default 0.05)")
    ap.add_argument("--dir", default="hf_load_work", help="where the model goes (a disk, not tmpfs)")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--regimes", default="cold,warm")
    ap.add_argument("--evict", choices=("drop_caches", "fadvise"), default="drop_caches")
    ap.add_argument("--budget-s", type=float, default=480.0, help="start no new pass after this many seconds")
    ap.add_argument("--json", default=None, help="default: hf_load.json in --dir")
    ap.add_argument("--read-alone", action="store_true",
                    help=f"also {READ_ALONE}: load_file of the checkpoint onto the device, no model (is the read "
                         f"itself the bound, or what runs beside it?)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child_load(json.loads(a.child))), flush=True)
        return 0
    t_start = time.perf_counter()
    device = torch.device("cuda" if a.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if a.device == "auto" else a.device))
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", 0)
    regimes = [r for r in a.regimes.split(",") if r]
    if not regimes or any(r not in ("cold", "warm") for r in regimes):
        ap.error(f"--regimes {a.regimes!r}: give cold, warm or both")
    if a.params_b <= 0:
        ap.error(f"--params-b {a.params_b}: give a positive number of billions")
    d = os.path.abspath(a.dir)
    t = time.perf_counter()
    shape = generate(d, a.params_b, device)
    gen_s = time.perf_counter() - t
    size = sum(os.path.getsize(f) for f in files_of(d))
    print(f"model: Llama-shaped {shape['params'] / 1e9:.2f} B parameters, bf16, {len(files_of(d))} shards, "
          f"{size / 2**30:.2f} GiB in {d} (generated in {gen_s:.0f} s); device {device}", flush=True)
    res: dict = {"shape": shape, "bytes": size, "device": str(device), "passes": {r: {} for r in regimes}}
    timeout = max(120.0, size / 2**30 * 60)
    for k in range(a.rounds):
        for regime in regimes:
            for m in rotated(METHODS + ((READ_ALONE,) if a.read_alone else ()), k):
                if time.perf_counter() - t_start > a.budget_s:
                    print(f"budget of {a.budget_s:.0f} s spent: no pass after round {k + 1} {regime}", flush=True)
                    break
                r = run_child({"method": m, "dir": d, "device": str(device), "cold": regime == "cold",
                               "evict": a.evict}, timeout)
                res["passes"][regime].setdefault(m, []).append(r)
                print(f"round {k + 1} {regime:<4} {m:<13} " + (f"{r['seconds']:.2f} s ({r['regime']}, "
                      f"{r['resident']:.0%} resident, {r['misaligned']}/{r['tensors']} misaligned, logits "
                      f"{r['logits']}{_parts(r)})" if "seconds" in r else r["failed"]), flush=True)
    lines = table(res)
    print("\n".join(lines))
    res["table"] = lines
    with open(a.json or os.path.join(d, "hf_load.json.out"), "w") as f:
        json.dump(res, f, indent=1)
    failed = any("failed" in p for by in res["passes"].values() for ps in by.values() for p in ps)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
