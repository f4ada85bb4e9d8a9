"""The loader's knobs: defaults, and the environment overrides that tuning runs use, read here and nowhere else.

  GPUIO_SAFETENSORS_CHUNK_MIB   one read and one host->device copy (default 16 MiB: 16 x 1 MiB engine requests)
  GPUIO_SAFETENSORS_THREADS     reader threads: reads in flight at once, each with two chunk-sized page-locked
                                slots on CUDA (default 8)
  GPUIO_SAFETENSORS_IO_KIB      the largest O_DIRECT request the file's engine merges runs into (default: the
                                engine's io_bytes_max, 1 MiB); the GPU machine's virtio disk read 128 KiB
                                requests at QD32 faster than 1 MiB ones in some runs
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
IO_BYTES_MAX = _env_int("GPUIO_SAFETENSORS_IO_KIB", 0, 0, 1024) << 10  # 0: the engine's default
