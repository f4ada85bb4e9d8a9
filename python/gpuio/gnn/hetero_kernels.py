"""Deterministic CUDA kernels for the hetero job (gpuio.gnn.hetero_job): chosen once, tried on the warm-up, so
that runs on the same batches give bit-equal losses (GATConv's scatter otherwise adds in a different order each
run), or the op that has no deterministic kernel is named."""
from __future__ import annotations

import os
import warnings

import torch


def deterministic_kernels(cfg, warm) -> str | None:
    """warm() (the job's warm-up), and on CUDA with cfg.deterministic torch's deterministic kernels for every run:
    None where not asked for (or on the CPU, whose kernels are deterministic), "" where every kernel the job
    runs has a deterministic version, else the error naming the first that has none (torch then only warns of
    it, silenced here: the report says why losses may differ)."""
    if not (cfg.deterministic and cfg.device.startswith("cuda")):
        warm()
        return None
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # hetero_job.run set it before any matmul
    torch.use_deterministic_algorithms(True)
    try:
        warm()
        return ""
    except RuntimeError as e:
        if "deterministic" not in str(e):
            raise
        warnings.filterwarnings("ignore", message=".*deterministic.*")
        torch.use_deterministic_algorithms(True, warn_only=True)
        warm()
        return str(e).splitlines()[0]
