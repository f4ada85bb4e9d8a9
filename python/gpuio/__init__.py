"""gpuio: SSD data into GPU (or host) memory at the devices' speed, with CPU-managed queues.

Layers (see DESIGN.md): io backends and the engine live in the C++ core (``gpuio._core``); this package
adds the Python API. Heavy submodules (torch, PyG) load on first use. Modules import downward only
(tests/python/test_layers.py), bottom first:

- engine: ``defaults`` (every knob: default, range, environment variable, doc), ``future`` (Future: what every
  asynchronous call returns), ``engine`` (Engine, aligned_empty), ``gpu`` (the engine's GPU path), ``sim`` (flash
  simulator)
- tensor: ``tensor`` (TensorFile), ``device_array`` (DeviceArray); beside them ``streams`` (StreamStore) and
  ``safetensors`` (model weights: safetensors files into GPU memory, page-cache aware)
- rows: ``rows`` (the Rows protocol, in-memory and mmap row tables); beside it ``volumes`` (Ceph volumes)
- cache: ``cache`` (FeatureStore: page cache, host buffer, window, accumulator)
- graph: ``graph`` (CSC and its parser, hotness scores, CSC files on storage, ``GraphData``)
- pyg/loader: ``pyg`` (PyG stores and samplers), ``loader`` (NodeBatchLoader)
- applications: ``apps``, ``gnn``, ``data``, ``cli``, ``bench``, ``sysinfo`` (gpuio.info), ``sim_report``
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

# name -> module that defines it; imported on first attribute access so `import gpuio` stays light.
_LAZY = {
    "Engine": "gpuio.engine",
    "Target": "gpuio.engine",
    "default_engine": "gpuio.engine",
    "Future": "gpuio.future",
    "Handle": "gpuio.engine",  # deprecated: gpuio.Future
    "aligned_empty": "gpuio.engine",
    "empty": "gpuio.gpu",
    "TensorFile": "gpuio.tensor",
    "FeatureStore": "gpuio.cache",
    "DeviceArray": "gpuio.device_array",
    "info": "gpuio.sysinfo",
}
_SUBMODULES = {"defaults", "streams", "pyg", "sim", "loader", "cache", "tensor", "data", "gpu", "bench", "gnn", "apps",
               "graph", "volumes", "safetensors"}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"gpuio.{name}")
    raise AttributeError(f"module 'gpuio' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY) + list(_SUBMODULES))
