"""GPT-2 load / train / checkpoint (GNStor Fig. 17) with the checkpoint (weights and Adam state) on storage.

The model is built from a `transformers` GPT2Config (random init, no hub download): "tiny" (CI), "small"
(GPT-2 small, 124 M parameters), "medium" (355 M). After one Adam step (so the optimizer holds its
exp_avg/exp_avg_sq/step), the job is timed as GNStor does: checkpoint save, checkpoint load back onto the
device, and a few training steps, with three checkpoint paths on the same state:
  gpuio       gpuio.safetensors (block-aligned data, pinned staging, O_DIRECT; on volumes gpuio_apps.papers.checkpoint);
  torch       torch.save / torch.load(map_location=device);
  safetensors safetensors.torch.save_file / load_file(device=device).
Every save is timed until its bytes are on the device (gpuio syncs its store; the baselines' files are
fsynced inside the clock, their time up to the return kept beside it as save_<path>_unsynced_s).
Checks: every loaded tensor equals the saved one bit for bit (all three paths); safetensors' own
load_file reads gpuio's file; a model and optimizer restored from gpuio's checkpoint take the next step
to the same loss as the uninterrupted ones (exactly on the CPU). The raw device's sequential read and
write rates on the same file system are printed beside the checkpoint rates (judged: >= 0.9 x raw,
>= 3 x torch.save/torch.load).
On Ceph volumes (`--store rbd:POOL/IMAGE`, comma-separated for RAID-0) the checkpoint is the same
safetensors bytes at the start of the volume, and the baseline is GNStor's Basic (synchronous librbd +
copy) writing and reading those bytes; safetensors.torch.load (in memory) takes the checkpoint's bytes
as gpuio reads them back from the volume (their length comes from the header).

    python -m gpuio_apps.papers.gpt2 --size small --device cuda --cold        # needs `pip install 'gpuio[apps]'`
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch

from . import checkpoint, common
from .pipeline import drop_caches, regime, resolve_device, row, sync
from .store import is_volume, paths_of

MODELS = {  # GPT2Config fields; small and medium are GPT-2's published shapes
    "tiny": dict(n_layer=2, n_embd=64, n_head=2, vocab_size=1000, n_positions=64),
    "small": dict(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024),
    "medium": dict(n_layer=24, n_embd=1024, n_head=16, vocab_size=50257, n_positions=1024),
}
SIZES = {  # model, batch x seq tokens per step, timed training steps
    "tiny": dict(model="tiny", batch=2, seq=32, steps=2),
    "small": dict(model="small", batch=4, seq=256, steps=3),
    "medium": dict(model="medium", batch=4, seq=512, steps=3),
    "large": dict(model="medium", batch=4, seq=1024, steps=3),
}


def build(model: str, device: torch.device, seed: int = 0):
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        raise ImportError("the GPT-2 application needs transformers: pip install 'gpuio[apps]'") from None
    if model not in MODELS:
        raise ValueError(f"model={model!r} is not one of {', '.join(MODELS)}")
    torch.manual_seed(seed)
    cfg = GPT2Config(**MODELS[model], bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0)
    m = GPT2LMHeadModel(cfg).to(device)
    return m, torch.optim.Adam(m.parameters(), lr=1e-4)


def batch(vocab: int, b: int, s: int, step: int, device) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randint(0, vocab, (b, s), generator=g).to(device)


def train_step(m, opt, ids) -> float:
    opt.zero_grad(set_to_none=True)
    loss = m(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    return float(loss.detach())


def state_tensors(m, opt) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Weights (tied ones once) and Adam state as flat named tensors; the hyperparameters as metadata."""
    out = {f"model.{n}": p.detach() for n, p in m.named_parameters()}
    sd = opt.state_dict()
    for i, st in sd["state"].items():
        for k, v in st.items():
            out[f"optim.{i}.{k}"] = v if isinstance(v, torch.Tensor) else torch.tensor(v)
    return out, {"param_groups": json.dumps(sd["param_groups"])}


def restore(m, opt, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    params = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    missing = set(n for n, _ in m.named_parameters()) - set(params)
    if missing:
        raise KeyError(f"checkpoint lacks parameters {sorted(missing)[:3]}")
    m.load_state_dict(params, strict=False)  # tied weights (lm_head) follow the embedding
    state: dict[int, dict] = {}
    for k, v in tensors.items():
        if k.startswith("optim."):
            _, i, name = k.split(".", 2)
            state.setdefault(int(i), {})[name] = v.cpu() if name == "step" else v
    opt.load_state_dict({"state": state, "param_groups": json.loads(metadata["param_groups"])})


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k].cpu(), b[k].cpu()) and a[k].shape == b[k].shape
                                        for k in a)


def _metadata_of(head: bytes) -> dict:
    """The __metadata__ of a safetensors file's first bytes (8-byte length, JSON header)."""
    n = int.from_bytes(head[:8], "little")
    return json.loads(head[8:8 + n]).get("__metadata__", {})


def _timed(t: dict, name: str, dev, cold: bool, save, load, durable=None):
    """Time save() then load() (page cache dropped before each where allowed); returns (loaded, failure).
    durable: a path to fsync inside the save's clock (a save counts when its bytes are on the device, as
    gpuio's, which syncs its store; torch.save and safetensors return with the bytes in the page cache,
    which holds a whole GPT-2 medium checkpoint on the GPU machine). The time up to the return is kept
    as save_<name>_unsynced."""
    failure = drop_caches(cold)
    sync(dev)
    t0 = time.perf_counter()
    save()
    sync(dev)
    if durable:
        t[f"save_{name}_unsynced"] = time.perf_counter() - t0
        checkpoint.fsync_path(durable)
    t[f"save_{name}"] = time.perf_counter() - t0
    drop_caches(cold)
    t0 = time.perf_counter()
    loaded = load()
    sync(dev)
    t[f"load_{name}"] = time.perf_counter() - t0
    return loaded, failure


def _on_files(path: str, state: dict, meta: dict, dev, cold: bool, keep: bool, nbytes: int,
              raw_seconds: float):
    """gpuio, torch.save/load and safetensors on files beside each other; returns (times, gpuio's tensors,
    their metadata, failure, raw rates, baseline name)."""
    import safetensors.torch as sft

    files = {"gpuio": path, "torch": path + ".pt", "safetensors": path + ".st.safetensors"}
    detail: dict = {}  # gpuio's save_file answer: its phases (open, fill, waits, sync) and whether preallocated
    savers = {"gpuio": lambda p: detail.update(checkpoint.save_file(state, p, meta)),
              "torch": lambda p: torch.save(state, p),
              "safetensors": lambda p: sft.save_file(state, p, metadata=meta)}
    loaders = {"gpuio": lambda p: checkpoint.load_file(p, dev),
               "torch": lambda p: torch.load(p, map_location=dev),
               "safetensors": lambda p: sft.load_file(p, device=str(dev))}
    t: dict[str, float] = {}
    failure, raw, phases = None, {}, {}
    try:
        for name in ("gpuio", "torch", "safetensors"):
            loaded, f = _timed(t, name, dev, cold, lambda: savers[name](files[name]),
                               lambda: loaders[name](files[name]), durable=None if name == "gpuio" else files[name])
            failure = f or failure
            if not _same(state, loaded):
                raise AssertionError(f"GPT-2 checkpoint through {name}: loaded tensors differ from the saved ones")
            if name == "gpuio":
                from_gpuio = loaded
        phases = {"save_gpuio_phases": dict(detail)}
        # a re-save of the same state to the same path, as periodic checkpointing does: gpuio.safetensors writes a
        # new file under a temporary name and renames it over the old one (durable, never half-written), so the
        # write is a new file's (raw_first_write is its like); the raw rewrite of the old blocks is printed beside
        failure = drop_caches(cold) or failure
        sync(dev)
        t0 = time.perf_counter()
        detail.clear()
        savers["gpuio"](files["gpuio"])
        t["resave_gpuio"] = time.perf_counter() - t0
        phases["resave_gpuio_phases"] = dict(detail)
        # torch.save over its own earlier file, as a periodic checkpoint does (it truncates and writes anew),
        # timed to fsync: the like of gpuio's re-save
        failure = drop_caches(cold) or failure
        t0 = time.perf_counter()
        savers["torch"](files["torch"])
        checkpoint.fsync_path(files["torch"])
        t["resave_torch"] = time.perf_counter() - t0
        if not _same(state, sft.load_file(files["gpuio"])):
            raise AssertionError("safetensors.torch.load_file reads different tensors from gpuio's checkpoint")
        with open(files["gpuio"], "rb") as f:
            head = f.read(8)
            head += f.read(int.from_bytes(head, "little"))
        if raw_seconds > 0:
            # the raw device reading the checkpoint's own blocks, cold, then gpuio's load of them again: a read
            # reference beside the load (on 11-25 the load was 0.93, then 0.74 of raw_rates' 1 s samples)
            failure = drop_caches(cold) or failure
            same = common.raw_file_pass(files["gpuio"], nbytes)
            if same:
                failure = drop_caches(cold) or failure
                t0 = time.perf_counter()
                again = checkpoint.load_file(files["gpuio"], dev)
                sync(dev)
                t["load_gpuio_again"] = time.perf_counter() - t0
                del again
                raw["raw_file_read_Bps"] = same
                # and the raw device rewriting those blocks (a re-save in place would write these; the checkpoint is
                # read no more)
                failure = drop_caches(cold) or failure
                raw["raw_file_write_Bps"] = common.raw_file_pass(files["gpuio"], nbytes, write=True)
            scratch = path + ".raw"
            first = common.raw_first_write(scratch, nbytes)  # a new file's first write (the fresh save's like)
            # written out, not truncated: O_DIRECT reads of a hole return zeros with no disk I/O (a run
            # once reported a 735 GB/s "raw" read)
            zeros = bytes(64 << 20)
            with open(scratch, "wb") as f:
                for _ in range(max(1, -(-nbytes // len(zeros)))):
                    f.write(zeros)
                f.flush()
                os.fsync(f.fileno())
            try:
                raw.update(common.raw_rates(scratch, raw_seconds), **first)
            finally:
                os.unlink(scratch)
    finally:
        if not keep:
            for f in files.values():
                if os.path.exists(f):
                    os.unlink(f)
    return t, from_gpuio, _metadata_of(head), failure, dict(raw, **phases), "torch.save/load"


def _on_volume(store, state: dict, meta: dict, dev, workers, cold: bool, keep: bool):
    """The same safetensors bytes written and read by gpuio and by GNStor's Basic (synchronous librbd +
    copy) in one extent of the volume(s); safetensors' in-memory loader takes the bytes gpuio wrote."""
    import safetensors.torch as sft

    header, entries, data = checkpoint.layout(state, meta)
    total = len(header) + data
    t: dict[str, float] = {}
    failure = None
    with common.opened_pair(store, total, workers, device=dev, keep=keep) as (g, p):
        ext = common.alloc_both(g, p, "checkpoint", total)
        for name, st in (("gpuio", g), ("basic", p)):
            loaded, f = _timed(t, name, dev, cold, lambda: checkpoint.save(st, ext, header, entries, dev),
                               lambda: checkpoint.load(st, ext, total, dev))
            failure = f or failure
            if not _same(state, loaded):
                raise AssertionError(f"GPT-2 checkpoint through {name}: loaded tensors differ from the saved ones")
            if name == "gpuio":  # before Basic writes the same extent again
                from_gpuio = loaded
                raw = checkpoint.read_bytes(g, ext, checkpoint.stored_length(g, ext))
                if len(raw) != total or not _same(state, sft.load(raw)):
                    raise AssertionError("safetensors.torch.load reads different tensors from the volume's "
                                         "first bytes than gpuio saved")
        baseline = f"Basic ({p.data_path()})"
    return t, from_gpuio, _metadata_of(raw), failure, {}, baseline


def run(size: str = "tiny", store=None, device: str = "auto", cold: bool = False, workers: int | None = None,
        keep: bool = False, model: str | None = None, raw_seconds: float | None = None, **overrides) -> dict:
    prm = common.size_params(SIZES, size)
    prm.update(overrides)
    if model:
        prm["model"] = model
    dev = resolve_device(device)
    path = store or common.default_store("gpt2").replace(".bin", ".safetensors")
    volume = is_volume(paths_of(path))
    if not volume and (not isinstance(path, str) or "," in path):
        raise ValueError(f"store={store!r}: the GPT-2 checkpoint is one file (safetensors loads it) or Ceph "
                         "volumes rbd:POOL/IMAGE; checkpoint.save/load take a RAID-0 Store directly")
    m, opt = build(prm["model"], dev)
    vocab = m.config.vocab_size
    train_step(m, opt, batch(vocab, prm["batch"], prm["seq"], 0, dev))  # Adam state exists from here
    state, meta = state_tensors(m, opt)
    nbytes = sum(t.numel() * t.element_size() for t in state.values())
    if volume:
        t, from_gpuio, meta_back, failure, raw, baseline = _on_volume(path, state, meta, dev, workers, cold, keep)
        base = "basic"
        check = ("ok (bitwise equal through gpuio and Basic, safetensors.torch.load reads the volume's first "
                 "bytes as read by gpuio, resume loss equal)")
    else:
        # files go through gpuio.safetensors, on the process engine (gpuio.default_engine(); GPUIO_WORKERS sets its
        # workers); --workers applies to volumes
        raw_seconds = common.raw_seconds_for(size) if raw_seconds is None else raw_seconds
        t, from_gpuio, meta_back, failure, raw, baseline = _on_files(path, state, meta, dev, cold, keep, nbytes,
                                                                     raw_seconds)
        base = "torch"
        check = "ok (bitwise equal on all 3 paths, safetensors reads gpuio's file, resume loss equal)"
    # resume: the restored model's next step matches the uninterrupted model's
    ids = batch(vocab, prm["batch"], prm["seq"], 1, dev)
    m2, opt2 = build(prm["model"], dev, seed=1)
    restore(m2, opt2, from_gpuio, meta_back)
    loss_a, loss_b = train_step(m, opt, ids), train_step(m2, opt2, ids)
    tol = 0.0 if dev.type == "cpu" else 1e-4 * abs(loss_a)
    if abs(loss_a - loss_b) > tol:
        raise AssertionError(f"GPT-2 resumed from gpuio's checkpoint: loss {loss_b} != uninterrupted {loss_a}")
    sync(dev)
    t0 = time.perf_counter()
    for s in range(prm["steps"]):
        train_step(m, opt, batch(vocab, prm["batch"], prm["seq"], 2 + s, dev))
    sync(dev)
    train_s = time.perf_counter() - t0
    g_io = t["save_gpuio"] + t["load_gpuio"]
    b_io = t[f"save_{base}"] + t[f"load_{base}"]
    extra = {f"{k}_s": v for k, v in t.items()}
    extra.update(on=dev.type, model=prm["model"], checkpoint_bytes=nbytes, train_steps=prm["steps"], **raw)
    for other in [k[len("save_"):] for k in t if k.startswith("save_") and k != "save_gpuio"
                  and not k.endswith("_unsynced")]:
        extra[f"save_vs_{other}"] = t[f"save_{other}"] / t["save_gpuio"]
        extra[f"load_vs_{other}"] = t[f"load_{other}"] / t["load_gpuio"]
        if f"save_{other}_unsynced" in t:  # the baseline's save up to its return, its bytes in the page cache
            extra[f"save_vs_{other}_unsynced"] = t[f"save_{other}_unsynced"] / t["save_gpuio"]
    if "save_safetensors" in t:
        extra["safetensors_s"] = t["save_safetensors"] + t["load_safetensors"] + train_s
    if "raw_write_Bps" in raw:
        extra["save_of_raw"] = nbytes / t["save_gpuio"] / raw["raw_write_Bps"]
        extra["load_of_raw"] = nbytes / t["load_gpuio"] / raw["raw_read_Bps"]
        if "resave_gpuio" in t:  # the same save over the blocks the first one wrote
            extra["resave_of_raw"] = nbytes / t["resave_gpuio"] / raw["raw_write_Bps"]
    if "resave_torch" in t:  # both saves over their own earlier files
        extra["resave_vs_torch"] = t["resave_torch"] / t["resave_gpuio"]
    if "raw_file_read_Bps" in raw:  # the same blocks read raw between the two loads, then rewritten raw
        extra["load_of_raw_file"] = nbytes / t["load_gpuio"] / raw["raw_file_read_Bps"]
        extra["load_again_of_raw_file"] = nbytes / t["load_gpuio_again"] / raw["raw_file_read_Bps"]
        extra["resave_of_raw_file"] = nbytes / t["resave_gpuio"] / raw["raw_file_write_Bps"]
    if "raw_first_write_Bps" in raw:  # a new file's first write, raw, against the fresh save
        extra["save_of_raw_first_write"] = nbytes / t["save_gpuio"] / raw["raw_first_write_Bps"]
    return row(f"gpt2-{prm['model']}", size, regime(cold, failure), "gpuio checkpoint (safetensors layout)",
               g_io + train_s, baseline, b_io + train_s, g_io, train_s, check, **extra)


def main(argv=None) -> int:
    ap = common.parser("gpt2", __doc__, SIZES)
    ap.add_argument("--model", default=None, choices=list(MODELS), help="override the size's model")
    a = ap.parse_args(argv)
    r = run(a.size, a.store, a.device, a.cold, a.workers, a.keep, a.model)
    common.print_row(r)
    paths = [k[len("save_"):-2] for k in r if k.startswith("save_") and k.endswith("_s")
             and not k.endswith("_unsynced_s")]
    print(f"{r['model']}: checkpoint {r['checkpoint_bytes'] / 2**20:.1f} MiB; save "
          + ", ".join(f"{p} {r[f'save_{p}_s']:.3f} s" for p in paths) + "; load "
          + ", ".join(f"{p} {r[f'load_{p}_s']:.3f} s" for p in paths)
          + f"; train {r['compute_s']:.3f} s for {r['train_steps']} steps")
    other = "torch" if "save_vs_torch" in r else "basic"
    print(f"save/load vs {other} {r[f'save_vs_{other}']:.2f}x / {r[f'load_vs_{other}']:.2f}x (target >= 3; saves "
          f"timed until fsync; {other}'s save up to its return: {r.get(f'save_vs_{other}_unsynced', float('nan')):.2f}x); "
          + (f"of raw device {r['save_of_raw']:.2f} / {r['load_of_raw']:.2f} (target >= 0.9)"
             if "save_of_raw" in r else "raw device rates not measured"))
    if "resave_of_raw" in r:
        print(f"save to a new file {r['checkpoint_bytes'] / r['save_gpuio_s'] / 1e9:.2f} GB/s = "
              f"{r['save_of_raw_first_write']:.2f} x the raw first write of a new preallocated file "
              f"({r['raw_first_write_Bps'] / 1e9:.2f} GB/s); re-save over its blocks {r['resave_gpuio_s']:.3f} s = "
              f"{r['resave_of_raw']:.2f} x raw rewrite ({r['raw_write_Bps'] / 1e9:.2f} GB/s, {r['raw_write_cfg']})")
    if "resave_vs_torch" in r:
        print(f"re-save over its own file: gpuio {r['resave_gpuio_s']:.3f} s, torch.save {r['resave_torch_s']:.3f} s "
              f"({r['resave_vs_torch']:.2f}x)")
    if "load_of_raw_file" in r:
        print(f"the same blocks read raw {r['raw_file_read_Bps'] / 1e9:.2f} GB/s (1 MiB, QD 128): load "
              f"{r['load_of_raw_file']:.2f} x, load again after it {r['load_again_of_raw_file']:.2f} x; rewritten raw "
              f"{r['raw_file_write_Bps'] / 1e9:.2f} GB/s (QD 32, to fdatasync): re-save {r['resave_of_raw_file']:.2f} x")
    for k in ("save_gpuio_phases", "resave_gpuio_phases"):
        if k in r:
            print(f"{k}: " + ", ".join(f"{a} {b:.3f}" if isinstance(b, float) else f"{a} {b}"
                                       for a, b in r[k].items() if a not in ("bytes", "data_offset")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
