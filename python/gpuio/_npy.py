"""Reading a `.npy` header strictly: every header NumPy itself would refuse is refused here too, with a
ValueError naming the file and the problem (TensorFile.open trusts shape and dtype to size its I/O, so a
negative dimension or an unknown format version must never get through).

Format (NumPy's `.npy`, versions 1.0, 2.0 and 3.0): ``\\x93NUMPY``, major, minor, the header length
(uint16 little-endian for 1.0, uint32 for 2.0/3.0), then the header: a Python dict literal with exactly the
keys descr, fortran_order and shape, padded with spaces and ended by a newline; latin-1 text (UTF-8 in 3.0).
"""
from __future__ import annotations

import ast
import struct

import numpy as np

MAGIC = b"\x93NUMPY"
VERSIONS = {(1, 0): "<H", (2, 0): "<I", (3, 0): "<I"}
DICT_CHARS_MAX = 10_000  # the dict literal itself (before padding); NumPy's max_header_size is the same
_KEYS = {"descr", "fortran_order", "shape"}


def _fail(path, what: str):
    raise ValueError(f"{path}: not a valid .npy header: {what}")


def parse_header(raw: bytes, path="<bytes>", file_size: int | None = None):
    """(shape, fortran_order, dtype, data_offset) from the first bytes of a .npy file (at least up to the
    end of the header). file_size, when known, bounds the header length claimed by the prefix."""
    if raw[:6] != MAGIC:
        _fail(path, f"magic {bytes(raw[:6])!r} is not {MAGIC!r}")
    if len(raw) < 8:
        _fail(path, "file ends inside the version bytes")
    version = (raw[6], raw[7])
    if version not in VERSIONS:
        _fail(path, f"format version {version[0]}.{version[1]} is unknown (NumPy writes 1.0, 2.0, 3.0)")
    fmt = VERSIONS[version]
    prefix = 8 + struct.calcsize(fmt)
    if len(raw) < prefix:
        _fail(path, "file ends inside the header length")
    (hlen,) = struct.unpack_from(fmt, raw, 8)
    offset = prefix + hlen
    if file_size is not None and offset > file_size:
        _fail(path, f"header length {hlen} runs past the end of the {file_size}-byte file")
    if len(raw) < offset:
        _fail(path, f"file ends inside the {hlen}-byte header")
    body = bytes(raw[prefix:offset])
    if not body.endswith(b"\n"):
        _fail(path, "header does not end with a newline")
    try:
        text = body.decode("utf8" if version == (3, 0) else "latin1")
    except UnicodeDecodeError as e:
        _fail(path, f"header is not UTF-8 ({e})")
    text = text.rstrip(" \n")
    if len(text) > DICT_CHARS_MAX:
        _fail(path, f"header dict of {len(text)} characters exceeds {DICT_CHARS_MAX}")
    try:
        d = ast.literal_eval(text)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as e:
        _fail(path, f"header is not a Python literal ({type(e).__name__}): {text[:80]!r}")
    if not isinstance(d, dict) or set(d) != _KEYS:
        keys = sorted(map(repr, d)) if isinstance(d, dict) else type(d).__name__
        _fail(path, f"header must be a dict with keys {sorted(_KEYS)}, got {keys}")
    shape = d["shape"]
    if not isinstance(shape, tuple) or not all(type(s) is int for s in shape):
        _fail(path, f"shape {shape!r} is not a tuple of ints")
    if any(s < 0 for s in shape):
        _fail(path, f"shape {shape!r} has a negative dimension")
    if not isinstance(d["fortran_order"], bool):
        _fail(path, f"fortran_order {d['fortran_order']!r} is not a bool")
    try:
        dtype = np.lib.format.descr_to_dtype(d["descr"])
    except Exception as e:  # noqa: BLE001 - NumPy raises TypeError/ValueError/KeyError/... for bad descrs
        _fail(path, f"descr {d['descr']!r} is not a dtype ({type(e).__name__}: {e})"[:300])
    if dtype.hasobject:
        _fail(path, f"dtype {dtype} holds Python objects (pickled data is never loaded)")
    nbytes = dtype.itemsize
    for s in shape:
        nbytes *= s
    if nbytes >= 1 << 63:
        _fail(path, f"shape {shape!r} of {dtype} needs {nbytes} bytes, more than any file holds")
    return shape, d["fortran_order"], dtype, offset


def read_header(path):
    """parse_header() of the file at path (reads only the header's bytes)."""
    import os

    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(12)
        if head[:6] == MAGIC and len(head) >= 10 and (head[6], head[7]) in VERSIONS:
            fmt = VERSIONS[(head[6], head[7])]
            (hlen,) = struct.unpack_from(fmt, head, 8)
            want = 8 + struct.calcsize(fmt) + hlen
            if want <= size:
                head += f.read(want - len(head))
    return parse_header(head, path, size)
