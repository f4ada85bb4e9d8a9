"""gpuio: SSD data into GPU (or host) memory at the devices' speed, with CPU-managed queues.

This package is the library (docs/DESIGN.md, "Library and applications"); the command line, the demo jobs, the
papers' applications, the dataset generators and the benchmarks are its users, in the package gpuio_apps, which
nothing here imports. Layers (see DESIGN.md): io backends and the engine live in the C++ core (``gpuio._core``);
this package adds the Python API. Heavy submodules (torch, PyG) load on first use. Modules import downward only
(pyproject.toml's import contracts, tests/python/project/test_layers.py), bottom first:

- engine: ``defaults`` (every knob: default, range, environment variable, doc), ``future`` (Future: what every
  asynchronous call returns), ``engine`` (Engine, aligned_empty), ``gpu`` (GpuRuntime: the engine's GPU path),
  ``sim`` (flash simulator), ``sysinfo`` (gpuio.info)
- tensor: ``tensor`` (TensorFile), ``device_array`` (DeviceArray); beside them ``streams`` (StreamStore) and
  ``safetensors`` (model weights: safetensors files into GPU memory, page-cache aware)
- rows: ``rows`` (the Rows protocol, in-memory and mmap row tables); beside it ``volumes`` (Ceph volumes)
- cache: ``cache`` (TableCache: page cache, host buffer, window, accumulator)
- graph: ``graph`` (CSC and its parser, hotness scores, CSC files on storage, ``GraphData``)
- pyg/loader: ``pyg`` (PyG stores and samplers), ``loader`` (NodeBatchLoader)
"""
from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:  # what the names loaded on first use are, for type checkers; nothing is imported at run time
    from gpuio import (cache, defaults, device_array, engine, future, gpu, graph, loader, pyg, rows, safetensors,
                       sim, streams, sysinfo, tensor, volumes)
    from gpuio.cache import TableCache
    from gpuio.device_array import DeviceArray
    from gpuio.engine import Engine, Target, aligned_empty, default_engine
    from gpuio.future import Future
    from gpuio.gpu import empty
    from gpuio.sysinfo import info
    from gpuio.tensor import TensorFile

    FeatureStore = TableCache  # deprecated: gpuio.TableCache
    Handle = Future  # deprecated: gpuio.Future

# name -> module that defines it; imported on first attribute access so `import gpuio` stays light.
_LAZY = {
    "Engine": "gpuio.engine",
    "Target": "gpuio.engine",
    "default_engine": "gpuio.engine",
    "Future": "gpuio.future",
    "aligned_empty": "gpuio.engine",
    "empty": "gpuio.gpu",
    "TensorFile": "gpuio.tensor",
    "TableCache": "gpuio.cache",
    "DeviceArray": "gpuio.device_array",
    "info": "gpuio.sysinfo",
}
_SUBMODULES = ("cache", "defaults", "device_array", "engine", "future", "gpu", "graph", "loader", "pyg", "rows",
               "safetensors", "sim", "streams", "sysinfo", "tensor", "volumes")
# modules that left the library for the applications' package
_MOVED = {"apps": "gpuio_apps.papers", "gnn": "gpuio_apps.gnn", "data": "gpuio_apps.data", "bench": "gpuio_apps.bench",
          "cli": "gpuio_apps.cli", "sim_report": "gpuio_apps.sim_report"}

__all__ = sorted(_LAZY) + list(_SUBMODULES)


def __getattr__(name: str):
    from importlib import import_module

    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return import_module(f"gpuio.{name}")
    if name in ("FeatureStore", "Handle"):  # old names, kept for one release: each use warns
        from gpuio._deprecated import NOT_PYGS, renamed

        new, why = ("TableCache", NOT_PYGS) if name == "FeatureStore" else ("Future", "")
        return renamed(f"gpuio.{name}", f"gpuio.{new}", __getattr__(new), why)
    if name in _MOVED:
        raise AttributeError(f"module 'gpuio' has no attribute {name!r}: the applications left the library; "
                             f"import {_MOVED[name]} (pip's gpuio installs it too)")
    raise AttributeError(f"module 'gpuio' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__ + ["__version__"])
