"""Reading a `.npy` header strictly: every header NumPy itself would refuse is refused here too, with a
ValueError naming the file and the problem (TensorFile.open trusts shape and dtype to size its I/O, so a
negative dimension or an unknown format version must never get through).

Format (NumPy's `.npy`, versions 1.0, 2.0 and 3.0): ``\\x93NUMPY``, major, minor, the header length
(uint16 little-endian for 1.0, uint32 for 2.0/3.0), then the header: a Python dict literal with exactly the
keys descr, fortran_order and shape, padded with spaces and ended by a newline; latin-1 text (UTF-8 in 3.0).

Element types NumPy lacks (bfloat16) are stored as the NumPy dtype of their raw bits (STORED_AS: descr
'<u2') and named by a comment after the dict, inside the header's space padding:

    {'descr': '<u2', 'fortran_order': False, 'shape': (1000, 128), } # gpuio-dtype: bfloat16     ...\n

NumPy parses the header with ast.literal_eval, which skips comments, so np.load gives the bit patterns as
uint16; gpuio reads the comment and gives bfloat16. Without the comment a '<u2' file is plain uint16.
"""
from __future__ import annotations

import ast
import io
import re
import struct
import tokenize
from typing import NamedTuple

import numpy as np

MAGIC = b"\x93NUMPY"
VERSIONS = {(1, 0): "<H", (2, 0): "<I", (3, 0): "<I"}
DICT_CHARS_MAX = 10_000  # the dict literal itself (before padding); NumPy's max_header_size is the same
_KEYS = {"descr", "fortran_order", "shape"}
ELEMENT_COMMENT = "gpuio-dtype"  # `# gpuio-dtype: NAME` after the header dict names the element type
STORED_AS = {"bfloat16": np.dtype("<u2")}  # element types NumPy lacks -> the NumPy dtype of their bits
_ELEMENT_RE = re.compile(r"#\s*" + ELEMENT_COMMENT + r":\s*(\S*)\s*")


class NpyHeader(NamedTuple):
    shape: tuple
    fortran_order: bool
    dtype: np.dtype  # the elements as NumPy reads them (uint16 for a bfloat16 file)
    data_offset: int
    element: str | None  # the element type a `# gpuio-dtype:` comment names (a STORED_AS key), else None


def _fail(path, what: str):
    raise ValueError(f"{path}: not a valid .npy header: {what}")


def format_header(dtype: np.dtype, shape: tuple, data_offset: int, element: str | None = None) -> bytes:
    """The header of a C-ordered .npy whose data starts at `data_offset` (version 1.0 where the header fits
    its 16-bit length, else 2.0); `element` (a STORED_AS key) adds the comment that names it."""
    d = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
         "shape": tuple(int(s) for s in shape)}
    text = repr(d).encode("latin1")
    if element is not None:
        if STORED_AS.get(element) != np.dtype(dtype):
            raise ValueError(f"element type {element!r} is not stored as {np.dtype(dtype)}")
        text += f" # {ELEMENT_COMMENT}: {element}".encode("latin1")
    version, prefix = ((1, 10) if data_offset - 10 <= 0xFFFF else (2, 12))
    pad = data_offset - prefix - len(text) - 1
    if pad < 0:
        raise ValueError(f"shape {tuple(shape)} needs a header larger than {data_offset} bytes")
    text += b" " * pad + b"\n"
    size = struct.pack("<H" if version == 1 else "<I", len(text))
    return MAGIC + bytes([version, 0]) + size + text


def _element(text: str, dtype: np.dtype, path) -> str | None:
    """The element type named by a `# gpuio-dtype: NAME` comment in the header text (other comments are
    ignored, as NumPy ignores them all); a name gpuio does not know, or one whose bits are not `dtype`, is
    refused: reading the bits as something else would return wrong values."""
    if "#" not in text:
        return None
    try:
        comments = [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline)
                    if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        return None
    for c in comments:
        m = _ELEMENT_RE.fullmatch(c)
        if m is None:
            continue
        name = m.group(1)
        if name not in STORED_AS:
            _fail(path, f"comment {c!r} names element type {name!r}; this gpuio knows {sorted(STORED_AS)}")
        if dtype != STORED_AS[name]:
            _fail(path, f"comment {c!r} names {name}, stored as {STORED_AS[name]}, but descr is {dtype}")
        return name
    return None


def parse_header(raw: bytes, path="<bytes>", file_size: int | None = None) -> NpyHeader:
    """(shape, fortran_order, dtype, data_offset, element) from the first bytes of a .npy file (at least up to the
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
    return NpyHeader(shape, d["fortran_order"], dtype, offset, _element(text, dtype, path))


def read_header(path) -> NpyHeader:
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
