"""Fuzz targets (hypothesis, a few seconds in CI): the .npy header parser and the stream store's on-disk
structures take arbitrary bytes and either accept them consistently or refuse them with the documented
exception, never anything else. Inputs that once crashed the parsers are explicit examples."""
import os
import struct
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpuio._npy import parse_header  # noqa: E402
from gpuio.streams import StreamStoreCorrupt, StreamStoreWarning  # noqa: E402
from gpuio.streams.format import (DAMAGED, EMPTY, TORN, VALID, Superblock, Trailer,  # noqa: E402
                                  entries_per_page, page_pack, page_unpack)

FAST = settings(max_examples=int(os.environ.get("GPUIO_FUZZ_EXAMPLES", "150")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def npy(header: str, version=(1, 0), pad_to=128) -> bytes:
    body = header.encode("latin1")
    fmt = "<H" if version == (1, 0) else "<I"
    prefix = 8 + struct.calcsize(fmt)
    body += b" " * max(0, pad_to - prefix - len(body) - 1) + b"\n"
    return b"\x93NUMPY" + bytes(version) + struct.pack(fmt, len(body)) + body


# -- .npy headers -------------------------------------------------------------------------------------------
shapes = st.one_of(st.tuples(), st.lists(st.integers(-3, 1 << 20), max_size=4).map(tuple),
                   st.lists(st.integers(), max_size=3).map(tuple), st.just([5, 4]), st.just((5.0, 4)),
                   st.just((True,)), st.just("5"))
descrs = st.sampled_from(["<f4", "<f8", "|u1", "<i8", "|b1", ">f4", "|O", "<f9", "", "<U3", 5])


@FAST
@given(shape=shapes, descr=descrs, fortran=st.sampled_from([False, True, 0, "no"]),
       version=st.sampled_from([(1, 0), (2, 0), (3, 0), (9, 0), (1, 1)]))
@example(shape=(-5, 4), descr="<f4", fortran=False, version=(1, 0))   # opened with nbytes=-80 before
@example(shape=(5, 4), descr="<f4", fortran=False, version=(9, 0))    # unknown version was read as 2.0
@example(shape=[5, 4], descr="<f4", fortran=False, version=(1, 0))
def test_npy_header_structured(shape, descr, fortran, version):
    raw = npy(repr({"descr": descr, "fortran_order": fortran, "shape": shape}), version)
    try:
        header = parse_header(raw)
    except ValueError:
        return
    got_shape, got_fortran, dtype, offset, element = header
    assert isinstance(got_shape, tuple) and all(type(s) is int and s >= 0 for s in got_shape)
    assert isinstance(got_fortran, bool) and not dtype.hasobject and offset == len(raw) and element is None
    if version in ((1, 0), (2, 0)):  # whatever we accept, NumPy accepts the same way
        import io
        f = io.BytesIO(raw)
        np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        assert read(f) == (got_shape, got_fortran, dtype)


@FAST
@given(comment=st.text(st.characters(max_codepoint=255), max_size=40), descr=st.sampled_from(["<u2", "<f4", "|u1"]))
@example(comment="# gpuio-dtype: bfloat16", descr="<u2")
@example(comment="# gpuio-dtype: bfloat16", descr="<f4")
@example(comment="# gpuio-dtype: float8", descr="<u2")
@example(comment="#gpuio-dtype:bfloat16", descr="<u2")
@example(comment="# a note", descr="<u2")
def test_npy_header_comment(comment, descr):
    """Text after the dict: NumPy accepts it exactly when it is a comment (ast.literal_eval skips it). gpuio
    then names the element type from a `# gpuio-dtype:` comment or refuses it, and never accepts what NumPy
    refuses."""
    import io
    raw = npy(repr({"descr": descr, "fortran_order": False, "shape": (2, 3)}) + " " + comment, pad_to=256)
    f = io.BytesIO(raw)
    np.lib.format.read_magic(f)
    try:
        numpy_reads = np.lib.format.read_array_header_1_0(f)
    except Exception:  # noqa: BLE001 - NumPy lets SyntaxError and tokenize.TokenError through too
        numpy_reads = None
    try:
        header = parse_header(raw)
    except ValueError:
        return
    assert numpy_reads == ((2, 3), False, header.dtype), "gpuio accepted a header NumPy refuses"
    named = comment.strip().replace(" ", "") == "#gpuio-dtype:bfloat16"
    assert header.element == ("bfloat16" if named else None)
    assert not named or descr == "<u2"


@FAST
@given(raw=st.binary(max_size=300), keep_magic=st.booleans())
@example(raw=b"\x01\x00\xff\xff", keep_magic=True)
def test_npy_header_arbitrary_bytes(raw, keep_magic):
    if keep_magic:
        raw = b"\x93NUMPY" + raw
    try:
        parse_header(raw)
    except ValueError:
        pass


# -- stream store metadata ---------------------------------------------------------------------------------
BB, UUID = 4096, 0x1234_5678_9ABC


@FAST
@given(head=st.binary(max_size=64), tail=st.binary(max_size=64), fill=st.integers(0, 255))
def test_page_unpack_arbitrary_block(head, tail, fill):
    block = np.full(BB, fill, np.uint8)
    block[:len(head)] = np.frombuffer(head, np.uint8)
    block[BB - len(tail):] = np.frombuffer(tail, np.uint8)
    state, seq, body = page_unpack(block, 0, UUID)
    assert state in (VALID, EMPTY, TORN, DAMAGED)


@FAST
@given(seq=st.integers(1, 1 << 40), entries=st.lists(st.integers(0, (1 << 64) - 1), max_size=8),
       flips=st.lists(st.integers(0, 8 * BB - 1), min_size=1, max_size=3), cut=st.integers(0, 8))
@example(seq=2, entries=[0], flips=[8 * 8 + 3], cut=8)   # a flipped seq bit in the newest copy: was trusted old
def test_page_mutations_are_never_trusted(seq, entries, flips, cut):
    e = np.zeros(entries_per_page(BB), np.uint64)
    e[:len(entries)] = entries
    img = np.zeros(BB, np.uint8)
    page_pack(img, 3, seq, UUID, e)
    state, got, body = page_unpack(img, 3, UUID)
    assert state == VALID and got == seq and np.array_equal(np.frombuffer(body, np.uint64), e)
    if cut < 8:  # a torn write: the first `cut` sectors new, the rest the older copy (seq - 1)
        old = np.zeros(BB, np.uint8)
        page_pack(old, 3, seq - 1 if seq > 1 else seq + 1, UUID, np.zeros_like(e))
        old[:cut * 512] = img[:cut * 512]
        assert page_unpack(old, 3, UUID)[0] in ((TORN,) if cut else (VALID,))
    bad = img.copy()
    for bit in set(flips):
        bad[bit // 8] ^= 1 << (bit % 8)
    state, got, _ = page_unpack(bad, 3, UUID)
    if len(set(flips)) % 2 == 1 or state != VALID:  # any odd set of flips changes the image
        assert state == DAMAGED, "a changed, completely written copy is reported, never taken or passed over"


@FAST
@given(raw=st.binary(min_size=64, max_size=64))
def test_superblock_and_trailer_arbitrary_bytes(raw):
    buf = bytearray(raw)
    t = Trailer.unpack_from(buf, 0)  # a Trailer only when its magic and CRC hold, else None; never raises
    assert t is None or (struct.unpack_from("<I", buf)[0] == 0x314B4253 and isinstance(t, Trailer))
    try:
        sb = Superblock.unpack(buf + bytes(64))
    except StreamStoreCorrupt:
        return
    assert Superblock.unpack(sb.pack()) == sb


@settings(max_examples=int(os.environ.get("GPUIO_FUZZ_STORE_EXAMPLES", "12")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(0, 2), st.integers(0, BB - 1), st.integers(0, 7)), min_size=1,
                      max_size=4))
@example(flips=[(1, 40, 0)])
def test_store_with_damaged_metadata_opens_or_refuses_by_name(tmp_path_factory, flips):
    """Flip bits in the superblock (0), the table copies (1, 2 = slots of page 0) of a store with streams,
    or a stream's trailer block: opening it either works (then check() works or raises StreamStoreCorrupt)
    or raises StreamStoreCorrupt/ValueError naming the problem."""
    from streams_util import open_small

    d = tmp_path_factory.mktemp("fz")
    p = d / "s.bin"
    with open_small(p) as s:
        for k in range(3):
            sd = s.create_stream()
            s.write_stream(sd, np.arange(10 * k + 1))
            s.close_stream(sd)
        s.destroy_stream(1)
    with open(p, "r+b") as f:
        for block, byte, bit in flips:
            f.seek(block * BB + byte)
            v = f.read(1)[0]
            f.seek(block * BB + byte)
            f.write(bytes([v ^ (1 << bit)]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StreamStoreWarning)
        try:
            s = open_small(p)
        except (StreamStoreCorrupt, ValueError):
            return
    with s:
        try:
            s.check()
        except StreamStoreCorrupt:
            return
        assert 1 not in s.streams() or s._state.table.damaged, "a destroyed stream came back silently"
