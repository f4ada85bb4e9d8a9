"""Input checks for every `gpuio` command, run before any work starts.

Each check either returns the parsed value or raises InputError with one line that names the option and
the value ("--dtype 'foo': not a NumPy element type ..."). gpuio_apps.cli.main prints that line and exits 2
(the traceback only with `gpuio --debug`). Commands call these helpers; none repeats the logic.
"""
from __future__ import annotations

import importlib
import math
import os
from typing import Iterable, NoReturn, Sequence

import typer

# The click exceptions typer raises: click's own, or the copy that newer typer versions carry inside them.
click_exceptions = importlib.import_module(typer.BadParameter.__module__)

# Optional packages -> the pyproject extra that installs them (one source of truth for the CLI's hints).
EXTRAS = {"torch": "torch", "torch_geometric": "pyg", "scipy": "pyg", "matplotlib": "plot"}


class InputError(click_exceptions.UsageError):
    """A bad command-line input: the message is one line naming the option and the value. A click usage
    error (exit status 2), so a command run by click/typer directly (CliRunner) reports it the same way."""


def fail(option: str, value, why: str) -> NoReturn:
    raise InputError(f"{option} {_show(value)}: {why}")


def _show(value) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def missing_extra_message(module: str, needed_for: str = "") -> str:
    """"--plot needs matplotlib, which is not installed: pip install 'gpuio[plot]'" (a missing package; the
    quotes keep zsh from globbing the brackets)."""
    top = module.split(".")[0]
    if top == "gpuio":  # a module of gpuio itself: the C++ core (gpuio._core) was not built
        return f"{needed_for or 'this command'} needs {module}, which is missing: build gpuio (bash scripts/setup.sh)"
    extra = EXTRAS.get(top)
    hint = f"pip install 'gpuio[{extra}]'" if extra else f"pip install {top}"
    return f"{needed_for or 'this command'} needs {top}, which is not installed: {hint}"


def need(module: str, needed_for: str) -> None:
    """Imports an optional package now, so that a missing one is reported before the work, naming its extra."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] == module.split(".")[0]:
            raise InputError(missing_extra_message(module, needed_for)) from None
        raise InputError(f"{needed_for} needs {module}, which fails to import: {e}") from None
    except ImportError as e:  # installed, but broken (a missing shared library, a version clash)
        raise InputError(f"{needed_for} needs {module}, which fails to import: {e}") from None


# -- numbers ---------------------------------------------------------------------------------------------
def int_at_least(option: str, value: int, low: int, what: str = "") -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        fail(option, value, f"must be an integer >= {low}{what}")
    return value


def int_in(option: str, value: int, low: int, high: int, what: str = "") -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        fail(option, value, f"must be an integer in [{low}, {high}]{what}")
    return value




def available_memory_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (what can be allocated without swapping), None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_for(option: str, value, need_bytes: int, what: str) -> None:
    """Refuses ``value`` when ``what`` would need more memory than this machine has available."""
    have = available_memory_bytes()
    if have is not None and need_bytes > have:
        fail(option, value, f"{what} needs {need_bytes / (1 << 30):.3g} GiB of memory, "
                            f"{have / (1 << 30):.3g} GiB is available")


def number_in(option: str, value: float, low: float, high: float, low_open: bool = False) -> float:
    ok = isinstance(value, (int, float)) and math.isfinite(value) and \
        (low < value if low_open else low <= value) and value <= high
    if not ok:
        fail(option, value, f"must lie in {'(' if low_open else '['}{low}, {high}]")
    return value


def positive_number(option: str, value: float) -> float:
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        fail(option, value, "must be a number > 0")
    return value


def size(option: str, text: str, minimum: int = 1) -> int:
    """'8G', '512M', '1048576' -> bytes (binary units), at least ``minimum``."""
    from gpuio_apps.bench.datafile import parse_size
    try:
        n = parse_size(text)
    except ValueError:
        fail(option, text, "not a size (examples: 512M, 8G, 1048576)")
    if n < minimum:
        fail(option, text, f"must be at least {minimum} bytes")
    return n


def power_of_two(option: str, value: int, low: int) -> int:
    if not isinstance(value, int) or value < low or value & (value - 1):
        fail(option, value, f"must be a power of two >= {low}")
    return value


def int_list(option: str, text: str, allowed=lambda v: v >= 1, rule: str = "integers >= 1") -> tuple:
    try:
        values = tuple(int(t) for t in text.split(","))
    except ValueError:
        fail(option, text, f"must be comma-separated {rule}")
    if not all(allowed(v) for v in values):
        fail(option, text, f"must be comma-separated {rule}")
    return values


# -- names -----------------------------------------------------------------------------------------------
def choice(option: str, value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        fail(option, value, f"choose one of {', '.join(choices)}")
    return value


def choices(option: str, values: Iterable[str], allowed: Sequence[str]) -> tuple:
    """Each of ``values`` (a comma string or a list) must be in ``allowed``; duplicates and empties refused."""
    items = [v.strip() for v in values.split(",")] if isinstance(values, str) else list(values)
    bad = [v for v in items if v not in allowed]
    if bad or not items or len(set(items)) != len(items):
        fail(option, values if isinstance(values, str) else ",".join(items),
             f"give distinct names from {', '.join(allowed)}" + (f" (unknown: {', '.join(bad)})" if bad else ""))
    return tuple(items)


def dtype(option: str, text):
    """The gpuio ElementType `text` names (NumPy names, "bfloat16", "torch.float16", or a torch dtype)."""
    from gpuio.tensor import element_type
    try:
        return element_type(text)
    except (TypeError, ValueError) as e:
        why = "is big-endian; gpuio stores little-endian data" if isinstance(e, ValueError) else \
            "not an element type gpuio stores (examples: float32, bfloat16, float16, int64, uint8, bool)"
        fail(option, text, why)


def device(option: str, text: str) -> str:
    """'' (auto), 'cpu', 'cuda' or 'cuda:N'; CUDA ones only where torch sees that GPU."""
    if text in ("", "cpu"):
        return text
    head, _, index = text.partition(":")
    if head != "cuda" or (index and not index.isdigit()):
        fail(option, text, "choose cpu, cuda or cuda:N")
    import torch
    if not torch.cuda.is_available():
        fail(option, text, "no CUDA GPU is available to PyTorch here; use --device cpu")
    if index and int(index) >= torch.cuda.device_count():
        fail(option, text, f"this machine has {torch.cuda.device_count()} CUDA device(s)")
    return text


# -- paths -----------------------------------------------------------------------------------------------
def input_file(option: str, path: str) -> str:
    if not os.path.exists(path):
        fail(option, path, "no such file")
    if os.path.isdir(path):
        fail(option, path, "is a directory, not a file")
    if not os.access(path, os.R_OK):
        fail(option, path, "not readable (permission denied)")
    return path


def output_dir(option: str, path: str) -> str:
    """A folder this command will write into: it must exist and accept a new file (tried, then removed)."""
    if not os.path.exists(path):
        fail(option, path, "no such directory")
    if not os.path.isdir(path):
        fail(option, path, "not a directory")
    why = _unwritable(path)
    if why:
        fail(option, path, f"cannot write into this directory ({why})")
    return path


def _unwritable(folder: str) -> str | None:
    """Why a new file cannot be made in folder (tried, then removed), or None when it can."""
    import tempfile
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".gpuio-probe-")
    except OSError as e:
        return e.strerror
    os.close(fd)
    os.unlink(probe)
    return None


def output_file(option: str, path: str, force: bool = False, ours=None) -> str:
    """A file this command will write (through gpuio.outputs.atomic_output, so a failure leaves nothing):
    refused now when it is not a regular file (a device, fifo, directory, or a symlink to one: always), when
    it exists and neither --force nor ``ours(path)`` allows replacing it, or when its folder is missing or
    not writable. Free space: data_space."""
    from gpuio import outputs
    try:
        outputs.destination(path, overwrite=force, ours=ours)
    except outputs.OutputRefused as e:
        fail(option, path, e.reason + ("; pass --force to replace it" if e.forceable else
                                       "; gpuio never writes over one"))
    except FileNotFoundError as e:
        fail(option, path, e.strerror)
    folder = os.path.dirname(os.path.realpath(path))
    why = _unwritable(folder)
    if why:
        fail(option, path, f"cannot write into {folder} ({why})")
    return path


def data_space(option: str, value, path: str, need_bytes: int, ours=None) -> None:
    """Refuses ``value`` (of ``option``) when the file system of ``path`` lacks room for ``need_bytes``; an
    existing file there that ``ours`` recognises is replaced, so its bytes count as free."""
    from gpuio import outputs
    real = os.path.realpath(path)
    reclaim = os.path.getsize(real) if ours is not None and os.path.isfile(real) and ours(real) else 0
    try:
        outputs.check_space(real, need_bytes, reclaim)
    except OSError as e:
        fail(option, value, e.strerror if path == value else f"{path} {e.strerror}")


# -- source files of `gpuio import` ------------------------------------------------------------------------
def npy_source(option: str, path: str):
    """The array of a .npy file, memory-mapped, after checking its header and that the file holds all the
    data the header promises (a truncated or corrupt file is refused here, not halfway through)."""
    import numpy as np

    from gpuio.tensor import read_npy_header as read_header
    try:
        h = read_header(path)  # strict (objects refused too), one line whatever is wrong
    except ValueError as e:
        fail(option, path, str(e).removeprefix(f"{path}: "))
    except OSError as e:
        fail(option, path, f"cannot read it ({e.strerror})")
    shape, dt = h.shape, h.dtype
    need_bytes = h.data_offset + math.prod(shape) * dt.itemsize
    have = os.path.getsize(path)
    if have < need_bytes:
        fail(option, path, f"truncated .npy: header says {shape} {dt} ({need_bytes} bytes), the file has {have}")
    try:
        return np.load(path, mmap_mode="r")
    except (ValueError, OSError) as e:
        fail(option, path, f"cannot read .npy ({e})")


def pt_source(option: str, path: str):
    import torch
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises RuntimeError/UnpicklingError/EOFError/... for a bad file
        fail(option, path, f"not a readable .pt tensor file ({type(e).__name__}; saved with torch.save?)")
    if not isinstance(obj, torch.Tensor):
        fail(option, path, f"holds a {type(obj).__name__}, not a tensor")
    if obj.layout != torch.strided:
        fail(option, path, f"holds a {str(obj.layout).removeprefix('torch.')} tensor; gpuio stores dense tensors "
                           "(save t.to_dense())")
    if obj.is_meta:
        fail(option, path, "holds a tensor on the meta device, which has a shape but no data")
    from gpuio.tensor import element_type
    try:
        element_type(obj.dtype)
    except (TypeError, ValueError):  # float8, complex32, quantized: no stored form
        fail(option, path, f"holds a {obj.dtype} tensor, an element type gpuio cannot store")
    return obj.contiguous()


def npy_element(option: str, path: str, stored):
    """The ElementType of a .npy source whose elements NumPy reads as `stored`: what its gpuio header comment
    names (a bfloat16 TensorFile's uint16 words), else `stored` itself, little-endian (a big-endian file is
    converted on import, values kept)."""
    from gpuio.tensor import read_npy_header as read_header
    try:
        element = read_header(path).element
    except ValueError as e:  # NumPy read this header; only a gpuio comment that names no known type lands here
        fail(option, path, str(e).split(": ", 1)[-1])
    try:
        return dtype(option, element or stored.newbyteorder("<"))
    except InputError as e:  # the message names the element type; the option here is the file
        fail(option, path, str(e).removeprefix(f"{option} "))


def raw_shape(option: str, text: str | None, nbytes: int, dt, src: str) -> tuple:
    """The shape of a raw file of ``nbytes`` of ``dt``: ``text`` is 'a,b,...' with at most one -1; the
    product must equal the file's element count exactly (no silently dropped tail)."""
    if nbytes % dt.itemsize:
        fail("SRC", src, f"{nbytes} bytes is not a whole number of {dt} elements ({dt.itemsize} bytes each)")
    count = nbytes // dt.itemsize
    if not text:
        return (count,)
    try:
        dims = tuple(int(s) for s in text.split(","))
    except ValueError:
        fail(option, text, "must be comma-separated integers, e.g. 1000000,128 (-1 once for 'the rest')")
    if dims.count(-1) > 1 or any(d < -1 for d in dims) or any(d == 0 for d in dims):
        fail(option, text, "dimensions must be >= 1, with at most one -1")
    known = math.prod(d for d in dims if d != -1)
    if -1 in dims:
        if count % known:
            fail(option, text, f"{src} holds {count} {dt} elements, not a multiple of {known}")
        dims = tuple(count // known if d == -1 else d for d in dims)
    elif known != count:
        fail(option, text, f"shape holds {known} elements, {src} holds {count} {dt} elements")
    return dims
