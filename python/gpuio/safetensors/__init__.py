"""Model weights into GPU (or host) memory: `safetensors.torch`'s API, read and written by gpuio.

    import gpuio.safetensors as st
    st.save_file({"w": w}, "model.safetensors", metadata={"format": "pt"})   # durable when it returns
    tensors = st.load_file("model.safetensors", device="cuda")            # or an index, a list, a directory
    with st.safe_open("model.safetensors", framework="pt", device="cuda") as f:
        part = f.get_slice("w")[0:128]                                      # reads only those rows

Any standard safetensors file loads (written by `safetensors`, unaligned offsets and all); files saved here
load in `safetensors`, fastsafetensors and Run:ai's model streamer. Every load reads through the GPU layer's plan
reader (gpuio/plan_reader.hpp; _read says how): page-cache aware (resident bytes copied from the page cache, the
rest read with O_DIRECT) and overlapped with the copies to the GPU; `stats=` (or safe_open's stats()) reports the
data path, e.g. 'pagecache 6.1 GiB + uring+direct 2.1 GiB -> pinned -> cuda:0'; cached_fraction(filename) says
beforehand how much is in the page cache, evict(filename) drops it (cold loads without root). Loads stage through
the plan reader's rings from the process's one pinned pool, CUDA saves through page-locked slots in 2 MiB pages
(safetensors.huge_slots); both stay registered for the next one: staging() says how much, and release_staging()
lets go of them. `StorageWriter`/`StorageReader` let `torch.distributed.checkpoint.save/load` write and read
through this module (gpuio.safetensors.dcp). `load(bytes)` reads a file held in memory (or a uint8 tensor of
its bytes, as views); `layout(tensors)` gives the header and byte order save_file writes, for writers of their
own (gpuio_apps.papers.checkpoint writes it to volumes). Bad files raise SafetensorError (a ValueError) in one line.

As safetensors.torch: save_file refuses tensors that share memory (RuntimeError); save_model(model, f) keeps
one name of each shared group and load_model(model, f) loads it back (into allocated parameters, or assigned
into a meta-device model, ties restored); save(tensors) gives the file's bytes; safe_open(framework="np")
gives NumPy arrays and offset_keys() the names in file order. from_pretrained(model_class, path, **kwargs) is
the model transformers' model_class.from_pretrained(path, ...) builds, its weights read by gpuio
(gpuio.safetensors._model; transformers is imported only then).
"""
from __future__ import annotations

from typing import Any

from ._format import DTYPE_NAMES, SafetensorError
from ._open import cached_fraction, evict, load, load_file, safe_open
from ._save import layout, save, save_file, tensor_bytes
from ._model import from_pretrained, load_model, save_model
from .. import _pinned

# StorageWriter/StorageReader (gpuio.safetensors.dcp) resolve on first use: torch.distributed loads only then
__all__ = ["load_file", "save_file", "safe_open", "load", "save", "load_model", "save_model", "from_pretrained", "layout", "tensor_bytes", "cached_fraction", "evict",
           "staging", "release_staging", "SafetensorError", "DTYPE_NAMES"]


def staging(huge_pages: bool = False) -> dict:
    """Page-locked host memory this process holds, all of it in or counted by gpuio's one pinned pool (pools: 1):
    made_bytes and free_bytes, the staging slots of CUDA saves (those not in use now: free); plan_reader, the C++
    plan reader's rings (every load's); page_locked_bytes, every page-locked byte gpuio holds
    (slots, rings, the engine's staging, the stream path's bounce pool, host buffers, the GPU layer's fixed
    allocations); pool, the pool's whole report by use (_core.pinned_pool_stats). With huge_pages=True also
    huge_page_bytes, the part of the pool's free blocks the kernel gave in 2 MiB pages (read from /proc/self/smaps:
    a diagnostic, not for a load's path)."""
    out = _pinned.pool_stats()
    out.update(_pinned.page_locked_stats())  # pools, page_locked_bytes, pool, plan_reader
    if huge_pages:
        out["huge_page_bytes"] = _pinned.huge_page_bytes()
    return out


def release_staging() -> int:
    """Let go of the pool's staging slots and plan reader rings not in use now (unregistered from CUDA and unmapped);
    returns their bytes. The next CUDA load or save makes new ones."""
    return _pinned.release_slots()


def __getattr__(name: str) -> Any:
    if name in ("StorageWriter", "StorageReader"):  # torch.distributed loads only when asked for
        from . import dcp

        return getattr(dcp, name)
    raise AttributeError(f"module 'gpuio.safetensors' has no attribute {name!r}")
