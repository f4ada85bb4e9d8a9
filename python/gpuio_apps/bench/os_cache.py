"""Page-cache control (BENCHMARKS.md): drop caches before each measured pass when allowed."""
from __future__ import annotations

import os

DROP = "/proc/sys/vm/drop_caches"


def drop_caches() -> str | None:
    """sync + echo 3 > drop_caches. Returns None on success, else why it could not."""
    os.sync()
    try:
        with open(DROP, "w") as f:
            f.write("3\n")
        return None
    except OSError as e:
        return f"cannot write {DROP}: {e.strerror}" + ("" if os.geteuid() == 0 else " (not root)")


def regime(cold: bool, failure: str | None) -> str:
    """The cache regime as reported in the table and JSON."""
    if cold and failure is None:
        return "cold+O_DIRECT"
    if cold:
        return "O_DIRECT (caches not dropped)"
    return "O_DIRECT"
