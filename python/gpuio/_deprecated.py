"""Old public names kept for one release: each use warns (DeprecationWarning) and names what replaces it. The
modules' __getattr__ hand them out, so `import gpuio` and `from gpuio import *` never touch them."""
from __future__ import annotations

import warnings
from typing import Any

__all__ = ["NOT_PYGS", "renamed"]

NOT_PYGS = " (PyG's FeatureStore, of named tensors, is gpuio.pyg.PygFeatureStore)"  # said with the old FeatureStore


def renamed(old: str, new: str, value: Any, why: str = "") -> Any:
    """value (the object now called `new`), after a DeprecationWarning at the caller of the module __getattr__
    that asked for `old`."""
    warnings.warn(f"{old} is deprecated: use {new}, the same object{why}", DeprecationWarning, stacklevel=3)
    return value
