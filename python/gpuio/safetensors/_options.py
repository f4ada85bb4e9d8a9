"""The loader's knobs: defaults, and the environment overrides that tuning runs use, read here and nowhere else.

  GPUIO_SAFETENSORS_CHUNK_MIB   one read and one host->device copy (default 16 MiB: 16 x 1 MiB engine requests)
  GPUIO_SAFETENSORS_THREADS     reader threads: reads in flight at once, each with two chunk-sized page-locked
                                slots on CUDA (default 8)
The O_DIRECT reads and writes go through the process engine (gpuio.default_engine()), whose own knobs are
GPUIO_<NAME> (e.g. GPUIO_IO_BYTES_MAX: the largest request runs are merged into, 1 MiB by default).
"""
from __future__ import annotations

import os


def _env_int(name: str, default: int, lo: int, hi: int) -> int:
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = lo - 1
    if not lo <= value <= hi:
        raise ValueError(f"{name}={text!r} must be an integer in [{lo}, {hi}]")
    return value


CHUNK_BYTES = _env_int("GPUIO_SAFETENSORS_CHUNK_MIB", 16, 1, 1024) << 20
THREADS_MAX = _env_int("GPUIO_SAFETENSORS_THREADS", 8, 1, 64)
