"""What a result was measured on: time, commit, host, the data file's device, the command line."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys


def _commit() -> str | None:
    """The commit of the checkout gpuio runs from (an editable install: the `gpuio` package's folder is
    <checkout>/python/gpuio), with "+dirty" for uncommitted changes to tracked files; None for an installed
    package, even one installed into a venv inside some git checkout (whose commit is not the package's)."""
    import gpuio

    here = os.path.dirname(os.path.abspath(gpuio.__file__))
    try:
        top = subprocess.run(["git", "-C", here, "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                             timeout=5).stdout.strip()
        if not top or not os.path.isdir(os.path.join(top, "python", "gpuio")) or \
                not os.path.samefile(here, os.path.join(top, "python", "gpuio")):
            return None
        out = subprocess.run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _version() -> str:
    from gpuio import __version__

    return __version__


def device_of(path: str) -> str:
    """The block device holding path, e.g. 'vda', from sysfs; 'unknown' where it cannot be told."""
    st = os.stat(path)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    try:
        with open(f"/sys/dev/block/{major}:{minor}/uevent") as f:
            fields = dict(line.strip().split("=", 1) for line in f if "=" in line)
        return fields.get("DEVNAME", f"{major}:{minor}")
    except OSError:
        return f"{major}:{minor} (no sysfs entry)"


def collect(path: str) -> dict:
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "commit": _commit(),
        "version": _version(),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "device": device_of(path),
        "command": " ".join(["gpuio"] + sys.argv[1:]) if sys.argv and sys.argv[0].endswith("gpuio") else None,
    }
