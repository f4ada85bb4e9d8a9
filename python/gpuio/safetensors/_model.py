"""Whole models: save_model/load_model (`safetensors.torch`'s, shared and tied tensors handled as it handles
them) and from_pretrained (a transformers model whose weights gpuio reads).

Shared tensors. A file holds each storage once: save_model keeps one name of each group of state-dict entries
that share memory (the first in sorted order of the names that cover the whole storage, as safetensors
chooses) and records each dropped name in the metadata (dropped -> kept). load_model finds the same groups in
the model (by storage for allocated tensors, by identity for meta ones, whose storage has no address),
prefers the names the file holds, loads those, and reports the others as safetensors.torch.load_model does:
a dropped name the file lacks is not missing, one it has is unexpected.

Meta models. Where any parameter or buffer of the model is on the meta device, every tensor the file holds
is assigned (`load_state_dict(assign=True)`), read straight onto `device` and cast to the dtype the model
declares; tied parameters are tied again (the other names of a group are set to the loaded tensor);
non-persistent buffers, which no checkpoint holds, are moved to `device` where the model has them with
values, and where they are on the meta device too they are reported (strict: RuntimeError naming them; else
in `missing`): their values come only from the module's own code, so build the model with them off meta
(from_pretrained does, through transformers).

from_pretrained hands the state dict gpuio reads (onto the device_map's one device) to transformers'
own loader (`model_class.from_pretrained(None, config=..., state_dict=...)`) while the read is still running
(the tensors allocated first; see _build_while_reading for why that is safe), so dtype selection, the
loading conversions, tied weights, non-persistent buffers (rotary inv_freq), eval() and the generation
config are transformers' own, in whichever version is installed; the checkpoint files are the ones
transformers picks in the directory (config.transformers_weights, else model.safetensors, else
model.safetensors.index.json).
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any

import torch

from ._format import SafetensorError
from ._save import save_file, shared_groups
from ._source import Checkpoint, resolve_device


def _is_complete(t: torch.Tensor) -> bool:
    st = t.untyped_storage()
    return t.data_ptr() == st.data_ptr() and t.numel() * t.element_size() == st.nbytes()


def remove_duplicate_names(state_dict: dict[str, torch.Tensor], *, preferred_names: Any = None,
                           groups: list[set[str]] | None = None) -> dict[str, list[str]]:
    """{kept name: [the other names of its group]} for each group of names sharing memory (groups: given, or
    found by storage as safetensors finds them). The kept name covers the whole storage; among those, the first
    sorted of preferred_names (the names a file holds) where any, else the first sorted."""
    preferred = set(preferred_names or ())
    out: dict[str, list[str]] = {}
    for shared in groups if groups is not None else shared_groups(state_dict):
        if len(shared) < 2:
            continue
        complete = {n for n in shared if state_dict[n].device.type == "meta" or _is_complete(state_dict[n])}
        if not complete:
            raise RuntimeError(f"tensors {sorted(shared)} share memory and none of them covers all of it: no "
                               f"name to keep; save a contiguous copy of each instead")
        keep = sorted(preferred & complete or complete)[0]
        out[keep] = [n for n in sorted(shared) if n != keep]
    return out


def save_model(model: torch.nn.Module, filename: str | os.PathLike, metadata: dict[str, str] | None = None,
               force_contiguous: bool = True) -> None:
    """Save model.state_dict() to `filename` (`safetensors.torch.save_model`): of each group of entries that
    share memory (tied weights) one name is kept, and metadata[dropped] = kept is recorded for each other one
    (the caller's metadata is not changed; its own entries win). force_contiguous: accepted as safetensors'
    (save_file here writes a non-contiguous tensor's bytes packed in any case)."""
    state_dict = model.state_dict()
    meta = dict(metadata) if metadata is not None else None
    for kept, dropped in remove_duplicate_names(state_dict).items():
        for name in dropped:
            meta = {} if meta is None else meta
            meta.setdefault(name, kept)
            del state_dict[name]
    if force_contiguous:
        state_dict = {k: v.contiguous() for k, v in state_dict.items()}
    save_file(state_dict, filename, metadata=meta)


def _identity_groups(tensors: dict[str, torch.Tensor]) -> list[set[str]]:
    by_id: dict[int, set[str]] = {}
    for name, t in tensors.items():
        by_id.setdefault(id(t), set()).add(name)
    return sorted(by_id.values(), key=sorted)


def _owner(model: torch.nn.Module, name: str) -> tuple[torch.nn.Module, str]:
    path, _, leaf = name.rpartition(".")
    return (model.get_submodule(path) if path else model), leaf


def _set(model: torch.nn.Module, name: str, value: torch.Tensor) -> None:
    mod, leaf = _owner(model, name)
    (mod._parameters if leaf in mod._parameters else mod._buffers)[leaf] = value


def _get(model: torch.nn.Module, name: str) -> torch.Tensor:
    mod, leaf = _owner(model, name)
    return mod._parameters[leaf] if leaf in mod._parameters else mod._buffers[leaf]


def _non_persistent(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    out = []
    for name, buf in model.named_buffers(remove_duplicate=False):
        mod, leaf = _owner(model, name)
        if leaf in mod._non_persistent_buffers_set:
            out.append((name, buf))
    return out


def load_model(model: torch.nn.Module, filename: Any, strict: bool = True, device: Any = "cpu"
               ) -> tuple[set[str], list[str]]:
    """Load a checkpoint (a file, a list, a sharded index or a directory) into `model`
    (`safetensors.torch.load_model`): allocated tensors are copied into in place; a model with tensors on the
    meta device gets the file's tensors assigned, read onto `device` (module doc: ties, non-persistent
    buffers). Only the tensors the model takes are read. Returns (missing, unexpected) as safetensors does
    (missing: the model's names not loaded, a set; unexpected: the file's names not used, a list); strict:
    RuntimeError naming them instead."""
    dev = resolve_device(device)
    from ._open import _read  # the loader's read of chosen names from an open checkpoint

    own = model.state_dict(keep_vars=True)
    on_meta = any(t.device.type == "meta" for t in own.values()) or any(
        b.device.type == "meta" for _, b in model.named_buffers())
    with Checkpoint(filename) as ckpt:
        file_keys = ckpt.keys()
        in_file = set(file_keys)
        if on_meta:
            to_removes = remove_duplicate_names(own, preferred_names=in_file, groups=_identity_groups(own))
        else:
            to_removes = remove_duplicate_names(model.state_dict(), preferred_names=in_file)
        dropped = [n for group in to_removes.values() for n in group]
        skip = set(dropped)
        names = [k for k in file_keys if k in own and k not in skip]
        state = _read(ckpt, names, dev, None)
    unexpected = [k for k in file_keys if k not in own]
    if on_meta:
        for k in names:
            if state[k].dtype != own[k].dtype:
                state[k] = state[k].to(own[k].dtype)
        missing_list, _ = model.load_state_dict(state, strict=False, assign=True)
        for kept, group in to_removes.items():
            if kept in state:
                for name in group:
                    _set(model, name, _get(model, kept))
    else:
        missing_list, _ = model.load_state_dict(state, strict=False)
    missing = set(missing_list)
    for name in dropped:  # not read (its group's kept name was): as safetensors, unexpected where the file has it
        missing.discard(name)
        if name in in_file:
            unexpected.append(name)
    meta_buffers = []
    if on_meta:
        for name, buf in _non_persistent(model):
            if buf.device.type == "meta":
                meta_buffers.append(name)
            elif buf.device != dev:
                _set(model, name, buf.to(dev))
        missing |= set(meta_buffers)
    if strict and (missing or unexpected):
        error = f"Error(s) in loading state_dict for {model.__class__.__name__}:"
        plain = sorted(missing - set(meta_buffers))
        if plain:
            error += "\n    Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in plain)
        if meta_buffers:
            error += ("\n    Non-persistent buffer(s) on the meta device, which no checkpoint holds (build the "
                      "model with them on a device): " + ", ".join(f'"{k}"' for k in sorted(meta_buffers)))
        if unexpected:
            error += "\n    Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in sorted(unexpected))
        raise RuntimeError(error)
    return missing, unexpected


# from_pretrained's own arguments handed on to transformers; every other keyword must be a config attribute
_PASSED = ("dtype", "torch_dtype", "device_map", "attn_implementation", "output_loading_info", "generation_config",
           "ignore_mismatched_sizes")


def _one_device(device_map: Any) -> torch.device:
    """The one device a device_map names: None (the CPU), "cpu", "cuda", "cuda:N", an int, a torch.device, or
    {"": one of those}; ValueError naming any other."""
    dm = device_map
    if isinstance(dm, dict):
        if set(dm) != {""}:
            raise ValueError(f"device_map={device_map!r}: gpuio.safetensors.from_pretrained places the whole model "
                             f"on one device ({{'': 'cuda:0'}}, 'cuda', 'cpu')")
        dm = dm[""]
    if dm is None:
        return torch.device("cpu")
    if isinstance(dm, str) and dm in ("auto", "balanced", "balanced_low_0", "sequential"):
        raise ValueError(f"device_map={device_map!r}: gpuio.safetensors.from_pretrained places the whole model "
                         f"on one device ('cuda', 'cuda:0', 'cpu', {{'': device}})")
    try:
        return resolve_device(dm)
    except ValueError as e:
        raise ValueError(f"device_map={device_map!r}: {e}") from None


def _weights(path: str, config: Any) -> str:
    """The checkpoint transformers would read in directory `path`."""
    explicit = getattr(config, "transformers_weights", None)
    names = [explicit] if explicit else ["model.safetensors", "model.safetensors.index.json"]
    for name in names:
        f = os.path.join(path, name)
        if os.path.isfile(f):
            return f
    there = sorted(n for n in os.listdir(path) if n.endswith((".bin", ".safetensors", ".json", ".gguf", ".pt")))
    raise SafetensorError(f"{path}: no {' or '.join(names)} (gpuio reads safetensors checkpoints; the directory "
                          f"holds {', '.join(there) or 'none of them'})")


def from_pretrained(model_class: Any, path: str | os.PathLike, *, stats: dict | None = None, **kwargs: Any) -> Any:
    """The model `model_class.from_pretrained(path, **kwargs)` gives (transformers), its weights read by gpuio:
    every parameter and buffer as transformers makes them (dtype, tied weights, non-persistent buffers),
    model.eval(), the directory's generation config. path: a local directory (never a download). kwargs:
    dtype/torch_dtype, device_map (one device: "cuda", "cuda:0", "cpu", {"": device}), attn_implementation,
    output_loading_info, generation_config, ignore_mismatched_sizes, config, and attributes of the config
    (as transformers takes them); any other keyword is refused naming it. The model is built while its weights
    are read (_build_while_reading). stats (gpuio's own, optional dict): load_file's stats of the read, and
    read_s, build_s (transformers' part, beside the read), wait_s (for the read after it), settle_s, rebuilt
    (True: built again after the read, see _build_while_reading), seconds."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a local directory, got {type(path).__name__}")
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise ValueError(f"path={path!r} is not a local directory: gpuio.safetensors.from_pretrained reads a "
                         f"checkpoint on this machine (fetch it first, e.g. huggingface_hub.snapshot_download)")
    import transformers
    from transformers import GenerationConfig

    passed = {k: kwargs.pop(k) for k in _PASSED if k in kwargs}
    config = kwargs.pop("config", None)
    cls = model_class
    if config is None:
        auto = getattr(model_class, "_model_mapping", None) is not None
        config_class = transformers.AutoConfig if auto else model_class.config_class
        config = config_class.from_pretrained(path, local_files_only=True)
        bad = [k for k in kwargs if not hasattr(config, k)]
        if bad:
            raise ValueError(f"{bad[0]}={kwargs[bad[0]]!r}: gpuio.safetensors.from_pretrained does not take this "
                             f"keyword (it is no attribute of {type(config).__name__} either)")
        if kwargs:
            config = config_class.from_pretrained(path, local_files_only=True, **kwargs)
    elif kwargs:
        k = next(iter(kwargs))
        raise ValueError(f"{k}={kwargs[k]!r}: gpuio.safetensors.from_pretrained does not take this keyword "
                         f"beside config=")
    elif not isinstance(config, getattr(transformers, "PreTrainedConfig", None) or transformers.PretrainedConfig):
        raise ValueError(f"config={config!r}: pass a configuration object (the directory's config.json is read "
                         f"without one)")
    if getattr(model_class, "_model_mapping", None) is not None:
        try:
            cls = model_class._model_mapping[type(config)]
            cls = cls[0] if isinstance(cls, (list, tuple)) else cls
        except (KeyError, ValueError):
            raise ValueError(f"{model_class.__name__} has no model class for {type(config).__name__}") from None
    device = _one_device(passed.get("device_map"))
    want_info = bool(passed.pop("output_loading_info", False))

    def build(state: dict[str, torch.Tensor]) -> tuple[Any, dict]:
        return cls.from_pretrained(None, config=config, state_dict=state, output_loading_info=True, **passed)

    model, info = _build_while_reading(_weights(path, config), device, build, stats)
    out = (model, info) if want_info else model
    model.config.name_or_path = path
    model.name_or_path = path
    gen = os.path.join(path, "generation_config.json")
    if "generation_config" not in passed and model.can_generate() and os.path.isfile(gen):
        model.generation_config = GenerationConfig.from_pretrained(path, local_files_only=True)
    return out


def _build_while_reading(weights: str, device: torch.device, build: Any, stats: dict | None) -> tuple[Any, dict]:
    """build(state) -- transformers' from_pretrained handed the state dict -- while the plan reader fills state's
    tensors (their memory allocated first, each owned and aligned as load_file gives it), so the model's
    construction overlaps the read. transformers makes each parameter of the state's tensor itself (a view:
    nothing of its values is read while it builds); after the read, _settle checks that and casts again what it
    cast. Where it derived a tensor from the state's (a loading conversion, which read bytes not yet
    there), the model is built again from the state now read, with the random generators as they were at the
    first build: the sequential path's result, exactly. The read's error, if any, is raised after the build ends,
    and nothing writes the tensors after this returns."""
    from ._read import destinations, read_spans

    t0 = time.perf_counter()
    with Checkpoint(weights) as ckpt:
        names = ckpt.select(None)
        by_file = ckpt.by_file(names)
        state, spans = destinations(by_file, device)
        done: list[Any] = []

        def read() -> None:
            try:
                done.append(read_spans(ckpt, spans, device, None, None, zero_copy=False))
            except BaseException as e:  # noqa: BLE001 - raised in the caller's thread below
                done.append(e)

        rng = _rng_state(device)
        reader = threading.Thread(target=read, name="gpuio-pretrained-read", daemon=True)
        reader.start()
        t_build = time.perf_counter()
        try:
            model, info = build(state)
        finally:
            t_built = time.perf_counter()
            reader.join()
            t_read = time.perf_counter()
        if isinstance(done[0], BaseException):
            raise done[0]
    read_stats = done[0]
    rebuilt = not _settle(model, state, info)
    if rebuilt:
        del model
        _set_rng_state(device, rng)
        model, info = build(state)
    end = time.perf_counter()
    if stats is not None:
        stats.update(read_stats, files=len(by_file), tensors=len(names), rebuilt=rebuilt,
                     read_s=read_stats["seconds"], build_s=t_built - t_build, wait_s=t_read - t_built,
                     settle_s=end - t_read, seconds=end - t0)
    return model, info


def _settle(model: Any, state: dict[str, torch.Tensor], info: dict) -> bool:
    """After the read: True where every tensor of the model's state dict that came from `state` is the state's own
    memory (now read) or transformers' cast of it to another dtype (the state tensor of its name and shape: cast
    again now, as .to(dtype) casts); False where one is neither (a copy of the same dtype, or a tensor of no name
    in the state: transformers derived it while building, from bytes not yet read). Keys transformers reports
    missing or mismatched are its own initialisation and are left alone. The one case this cannot tell: a loading
    conversion that changed a tensor's values and cast it at once, under its own name and shape, is taken for a
    cast (and its values lost); the CPU and GPU tests compare the result with transformers' own for GPT-2 and
    Llama models."""
    ours = {t.data_ptr() for t in state.values() if t.numel()}
    skip = set(info.get("missing_keys", ())) | {m[0] for m in info.get("mismatched_keys", ())}
    again, others = [], []
    for name, t in model.state_dict(keep_vars=True).items():
        if name in skip or t.numel() == 0 or t.data_ptr() in ours:
            continue
        src = state.get(name)
        if src is None or src.shape != t.shape or src.device != t.device or src.dtype == t.dtype:
            others.append(t)
        else:
            again.append((t, src))
    cast = {t.data_ptr() for t, _ in again}
    if any(t.data_ptr() not in cast for t in others):  # a tied name of a cast tensor is that tensor
        return False
    with torch.no_grad():
        for t, src in again:
            t.copy_(src)
    return True


def _rng_state(device: torch.device) -> tuple[torch.Tensor, torch.Tensor | None]:
    cuda = device.type == "cuda" and torch.cuda.is_initialized()
    return torch.random.get_rng_state(), (torch.cuda.get_rng_state(device) if cuda else None)


def _set_rng_state(device: torch.device, rng: tuple[torch.Tensor, torch.Tensor | None]) -> None:
    torch.random.set_rng_state(rng[0])
    if rng[1] is not None:
        torch.cuda.set_rng_state(rng[1], device)
