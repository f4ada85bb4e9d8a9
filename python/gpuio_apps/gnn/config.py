"""What the GNN jobs' configurations (the demo, the hetero job) resolve the same way."""
from __future__ import annotations

import torch


def apply_machine_defaults(cfg, cpu: dict, gpu: dict, backends: tuple) -> None:
    """cfg.device defaults to CUDA where torch sees it; every field left 0/empty takes the CPU or GPU
    default; cfg.backends must name known feature sources (ValueError naming the unknown ones)."""
    if not cfg.device:
        cfg.device = "cuda" if torch.cuda.is_available() else "cpu"
    for k, v in (gpu if cfg.device.startswith("cuda") else cpu).items():
        if not getattr(cfg, k):
            setattr(cfg, k, v)
    bad = [b for b in cfg.backends if b not in backends]
    if bad:
        raise ValueError(f"unknown backend(s) {bad}; choose from {backends}")
