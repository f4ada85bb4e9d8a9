"""Deterministic CUDA kernels for the hetero job (gpuio_apps.gnn.hetero_job), so that runs on the same batches give
bit-equal losses (GATConv's scatter otherwise adds in a different order each run).

torch runs warn-only: an op that has no deterministic CUDA kernel runs its fast one and warns instead of stopping
the job mid-run (the feature stores' and the sampler's ops run only once the runs start). The warnings are caught
and kept (`alerts`), not shown: the report then compares losses within rounding and names the op. Uninitialised
memory is not filled (torch fills every new tensor under the deterministic setting; every buffer the job reads
is written first), so the runs do not pay for it.
"""
from __future__ import annotations

import os
import warnings

import torch


class DeterministicKernels:
    """start() / stop() around the job's runs (process-wide settings, restored by stop); verdict() for the report:
    None where not asked for (or on the CPU, whose kernels are deterministic already), "" where every op that ran
    had a deterministic kernel, else the first warning (naming an op without one)."""

    def __init__(self, cfg):
        self.on = bool(cfg.deterministic) and cfg.device.startswith("cuda")
        self.alerts: list = []
        self._saved = None

    def start(self) -> None:
        if not self.on or self._saved is not None:
            return
        from torch.utils import deterministic
        self._saved = (torch.are_deterministic_algorithms_enabled(),
                       torch.is_deterministic_algorithms_warn_only_enabled(),
                       deterministic.fill_uninitialized_memory, warnings.catch_warnings())
        self._saved[3].__enter__()  # the warning filters and showwarning, restored by stop()
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # hetero_job.run set it before any matmul
        torch.use_deterministic_algorithms(True, warn_only=True)
        deterministic.fill_uninitialized_memory = False
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            text = str(message)
            if "deterministic" in text:
                if not self.alerts:
                    self.alerts.append(text.splitlines()[0])
                return
            shown(message, category, filename, lineno, file, line)
        warnings.filterwarnings("always", message=".*deterministic.*")  # every one reaches show(), from any thread
        warnings.showwarning = show

    def stop(self) -> None:
        if self._saved is None:
            return
        from torch.utils import deterministic
        enabled, warn_only, fill, caught = self._saved
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
        deterministic.fill_uninitialized_memory = fill
        caught.__exit__(None, None, None)
        self._saved = None

    def verdict(self) -> str | None:
        return None if not self.on else (self.alerts[0] if self.alerts else "")
