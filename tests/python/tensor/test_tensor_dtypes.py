"""TensorFile element types: torch dtypes and NumPy names alike, bfloat16 stored as uint16 words named by a
header comment, float16 native, assignment casting like torch (and exact=True), and the torch-like
conveniences (ndim, numel, size, torch.as_tensor, np.asarray).

Bit-exactness is checked on random 16-bit words (NaNs with payloads, infinities, subnormals, -0 included),
compared as int16, so no value comparison can hide a changed bit."""
import io
import os

import numpy as np
import pytest
import torch

from gpuio._npy import read_header
from gpuio.tensor import TensorFile

SEED = int(os.environ.get("GPUIO_TEST_SEED", "1234"))
HALF = [torch.bfloat16, torch.float16]
# (shape, block size, why): rows packed in blocks, rows that straddle blocks, rows of whole blocks
SHAPES = [((300, 64), 4096, "packed"), ((200, 1500), 4096, "straddling"), ((40, 2048), 4096, "whole blocks"),
          ((70, 256), 512, "whole 512 B blocks")]


def words(shape, seed=SEED):
    """Every kind of 16-bit pattern, as int16."""
    print(f"seed={seed}")
    return torch.from_numpy(np.random.default_rng(seed).integers(-32768, 32768, shape, dtype=np.int16))


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("shape,bs", [s[:2] for s in SHAPES], ids=[s[2] for s in SHAPES])
def test_half_types_round_trip_bit_exact(tmp_path, dtype, shape, bs):
    bits = words(shape)
    rng = np.random.default_rng(SEED + 1)
    path = tmp_path / "h.npy"
    with TensorFile.create(path, shape, dtype, block_size=bs) as tf:
        assert tf.torch_dtype == dtype
        tf.scatter(torch.arange(shape[0]), bits.view(dtype))
        idx = torch.from_numpy(rng.integers(0, shape[0], 97))
        idx[1] = idx[0]  # duplicates
        assert tf.gather(idx).dtype == dtype
        assert torch.equal(tf.gather(idx).view(torch.int16), bits[idx])
        assert torch.equal(tf[idx].view(torch.int16), bits[idx])
        assert torch.equal(tf[3].view(torch.int16), bits[3])
        perm = torch.from_numpy(rng.permutation(shape[0])[:30])  # distinct: whole-block rows read in place
        assert torch.equal(tf.prefetch(perm).wait().view(torch.int16), bits[perm])
        new = words((20, *shape[1:]), SEED + 2)
        tf[perm[:20]] = new.view(dtype)  # same dtype: the bits go in unchanged
        bits[perm[:20]] = new
        assert torch.equal(tf[:].view(torch.int16), bits)
    with TensorFile.open(path, block_size=bs) as tf:  # the element type survives a reopen
        assert tf.torch_dtype == dtype and repr(tf).count(str(dtype).removeprefix("torch."))
        assert torch.equal(tf[:].view(torch.int16), bits)
        assert torch.equal(tf.gather_pages([0], 1).view(torch.int16)[0], bits[:1])


def test_bfloat16_file_is_numpy_readable_as_its_words(tmp_path):
    bits = words((123, 7))
    path = str(tmp_path / "b.npy")
    with TensorFile.create(path, bits.shape, "bfloat16") as tf:
        tf[:] = bits.view(torch.bfloat16)
        offset = tf.data_offset
    a = np.load(path, mmap_mode="r")  # the NumPy of this venv
    assert a.dtype == np.uint16 and a.shape == (123, 7) and a.offset == offset
    assert np.array_equal(a.view(np.int16), bits.numpy())
    assert torch.equal(torch.from_numpy(np.array(a)).view(torch.bfloat16).view(torch.int16), bits)
    with open(path, "rb") as f:  # NumPy's own header readers see plain uint16
        assert np.lib.format.read_magic(f) == (1, 0)
        assert np.lib.format.read_array_header_1_0(f) == ((123, 7), False, np.dtype("<u2"))
    h = read_header(path)
    assert (h.dtype, h.element) == (np.dtype("<u2"), "bfloat16")
    # a safetensors-style reader: data offset + dtype + shape, the bytes taken as little-endian bfloat16
    raw = open(path, "rb").read()[offset:offset + bits.numel() * 2]
    got = torch.frombuffer(bytearray(raw), dtype=torch.bfloat16).view(bits.shape)
    assert torch.equal(got.view(torch.int16), bits)


def test_uint16_file_stays_uint16(tmp_path):
    vals = torch.arange(0, 65536, 257, dtype=torch.int32)  # 0 .. 65535
    with TensorFile.create(tmp_path / "u.npy", (vals.numel(),), "uint16") as tf:
        assert tf.torch_dtype == torch.uint16
        tf[:] = vals  # int32 values cast to uint16, as torch does: values, not bits
    h = read_header(tmp_path / "u.npy")
    assert (h.dtype, h.element) == (np.dtype("<u2"), None)
    assert b"gpuio-dtype" not in open(tmp_path / "u.npy", "rb").read(4096)
    np.save(tmp_path / "plain.npy", np.arange(5, dtype=np.uint16))  # NumPy's own uint16 file
    assert read_header(tmp_path / "plain.npy").element is None
    with TensorFile.open(tmp_path / "u.npy") as tf:
        assert tf.torch_dtype == torch.uint16
        assert torch.equal(tf[:].int(), vals)
    assert np.array_equal(np.load(tmp_path / "u.npy"), vals.numpy().astype(np.uint16))


def test_header_comment_naming_an_unknown_or_mismatched_type_is_refused(tmp_path):
    for descr, name, text in (("<u2", "float8", "names element type 'float8'"),
                              ("<f4", "bfloat16", "descr is float32")):
        TensorFile.create(tmp_path / "x.npy", (4,), "bfloat16", overwrite=True).close()
        raw = bytearray(open(tmp_path / "x.npy", "rb").read())
        end = raw.index(b"\n")
        body = bytes(raw[10:end]).replace(b"'<u2'", f"'{descr}'".encode()).replace(
            b"bfloat16", name.encode()).rstrip(b" ")
        raw[10:end] = body.ljust(end - 10)
        open(tmp_path / "x.npy", "wb").write(raw)
        with pytest.raises(ValueError, match=text):
            TensorFile.open(tmp_path / "x.npy")


SPELLINGS = [(torch.bfloat16, torch.bfloat16), ("bfloat16", torch.bfloat16), ("torch.bfloat16", torch.bfloat16),
             (torch.float16, torch.float16), ("float16", torch.float16), (np.float16, torch.float16),
             ("half", torch.float16), ("<f2", torch.float16), (np.float32, torch.float32),
             ("float32", torch.float32), (torch.float32, torch.float32), (np.dtype("float32"), torch.float32),
             ("f4", torch.float32), (torch.float64, torch.float64), ("float64", torch.float64),
             (torch.int64, torch.int64), ("int64", torch.int64), (np.int64, torch.int64),
             ("torch.int64", torch.int64), (torch.int32, torch.int32), ("int32", torch.int32),
             (torch.int16, torch.int16), ("int8", torch.int8), (torch.uint8, torch.uint8), ("uint8", torch.uint8),
             (torch.uint16, torch.uint16), ("uint16", torch.uint16), (bool, torch.bool), ("bool", torch.bool),
             (torch.bool, torch.bool), (torch.complex64, torch.complex64)]


@pytest.mark.parametrize("spec,want", SPELLINGS, ids=[repr(s) for s, _ in SPELLINGS])
def test_every_dtype_spelling_is_accepted(tmp_path, spec, want):
    with TensorFile.create(tmp_path / "s.npy", (3, 2), spec) as tf:
        assert tf.torch_dtype == want and tf[:].dtype == want
    stored = np.load(tmp_path / "s.npy").dtype
    assert stored == (np.dtype("<u2") if want == torch.bfloat16 else torch.empty(0, dtype=want).numpy().dtype)
    with TensorFile.open(tmp_path / "s.npy") as tf:
        assert tf.torch_dtype == want


BAD = [("foo", TypeError), ("torch.foo", TypeError), ("float8", TypeError), (torch.float8_e4m3fn, TypeError),
       (torch.complex32, TypeError), (None, TypeError), (object, TypeError), ("U3", TypeError),
       ("datetime64[s]", TypeError), (np.dtype([("a", "<f4")]), TypeError), (True, TypeError),
       (">f4", ValueError)]


@pytest.mark.parametrize("spec,exc", BAD, ids=[repr(s) for s, _ in BAD])
def test_bad_dtypes_are_refused_in_one_line_naming_the_value(tmp_path, spec, exc):
    with pytest.raises(exc) as ei:
        TensorFile.create(tmp_path / "bad.npy", (3,), spec)
    msg = str(ei.value)
    assert "\n" not in msg and repr(spec) in msg, msg
    assert not (tmp_path / "bad.npy").exists(), "a refused dtype left a file behind"


# -- assignment casts like torch; exact=True keeps the lossless check --------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32", "uint8", "bool"])
def test_assignment_casts_like_torch(tmp_path, dtype):
    g = torch.Generator().manual_seed(SEED)
    with TensorFile.create(tmp_path / "a.npy", (6, 32), dtype) as tf:
        ref = torch.zeros(6, 32, dtype=tf.torch_dtype)
        for key, value in [(slice(0, 2), 0.1), (0, np.random.default_rng(SEED).random(32)),
                           (1, torch.randn(32, generator=g, dtype=torch.float64) * 100),
                           (torch.tensor([2, 3]), torch.randn(2, 32, generator=g) * 50),
                           (4, list(range(-16, 16))), (5, torch.arange(32, dtype=torch.int64) * 3),
                           (slice(None), True)]:
            tf[key] = value
            # torch's own assignment: copy_ casts (torch's index_put_ under a tensor key wants the dtypes
            # equal; TensorFile casts there too, as copy_ would)
            ref[key] = torch.as_tensor(value).to(ref.dtype) if isinstance(key, torch.Tensor) else torch.as_tensor(value)
            assert torch.equal(tf[:], ref), (dtype, key)
        tf.scatter(torch.tensor([5]), torch.full((1, 32), 2.75, dtype=torch.float64))  # scatter casts the same
        ref[5] = 2.75
        assert torch.equal(tf[:], ref)
        if dtype != "bool":
            with pytest.raises(TypeError, match="complex"):
                tf[0] = torch.ones(32, dtype=torch.complex64)


def test_float64_into_bfloat16_rounds_as_torch_does(tmp_path):
    x = torch.randn(50, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(SEED))
    with TensorFile.create(tmp_path / "b.npy", x.shape, torch.bfloat16) as tf:
        tf[:] = x
        assert torch.equal(tf[:].view(torch.int16), x.to(torch.bfloat16).view(torch.int16))


def test_exact_scatter_refuses_lossy_values_and_writes_nothing(tmp_path):
    with TensorFile.create(tmp_path / "b.npy", (4, 3), "bfloat16") as tf:
        with pytest.raises(TypeError, match=r"rows\[0, 1\] = 0.1 changes to .*bfloat16.*exact=True"):
            tf.scatter([2], torch.tensor([[0.5, 0.1, 1.0]], dtype=torch.float64), exact=True)
        assert not tf[:].any(), "a refused scatter wrote"
        tf.scatter([2], torch.tensor([[0.5, float("nan"), -2.0]], dtype=torch.float64), exact=True)
        got = tf[2]
        assert got[0] == 0.5 and torch.isnan(got[1]) and got[2] == -2.0
    with TensorFile.create(tmp_path / "i.npy", (2, 2), "int16") as tf:
        tf.scatter([0], torch.tensor([[3.0, -7.0]]), exact=True)  # floats that are integers: lossless
        with pytest.raises(TypeError, match="2.5 changes to 2"):
            tf.scatter([1], torch.tensor([[1.0, 2.5]]), exact=True)
        with pytest.raises(TypeError, match="40000 changes to"):
            tf.scatter([1], torch.tensor([[1, 40000]]), exact=True)
        assert tf[:].tolist() == [[3, -7], [0, 0]]


# -- torch-like conveniences ---------------------------------------------------------------------------
def test_ndim_numel_size_dim(tmp_path):
    with TensorFile.create(tmp_path / "t.npy", (5, 3, 2), "float16") as tf:
        ref = torch.zeros(5, 3, 2)
        assert tf.ndim == ref.ndim == tf.dim() and tf.numel() == ref.numel() == 30
        assert tf.size() == ref.size() and isinstance(tf.size(), torch.Size)
        for d in range(-3, 3):
            assert tf.size(d) == ref.size(d)
        for d in (3, -4):
            with pytest.raises(IndexError, match=f"dim {d} is out of range"):
                tf.size(d)
        with pytest.raises(TypeError, match="dim must be an int"):
            tf.size("0")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64", "bool"])
def test_as_tensor_and_asarray_read_the_whole_table(tmp_path, dtype):
    ref = (torch.randn(1000, 37, generator=torch.Generator().manual_seed(SEED)) * 100).to(
        {"float32": torch.float32, "bfloat16": torch.bfloat16, "int64": torch.int64, "bool": torch.bool}[dtype])
    with TensorFile.create(tmp_path / "t.npy", ref.shape, dtype) as tf:
        tf[:] = ref
        for conv in (torch.as_tensor, torch.tensor, torch.from_dlpack):
            got = conv(tf)
            assert got.dtype == ref.dtype and torch.equal(got, ref), conv
        if dtype == "bfloat16":  # NumPy has no bfloat16: refused, naming what to use instead
            with pytest.raises(TypeError, match=r"NumPy has no bfloat16.*torch.as_tensor.*np.load"):
                np.asarray(tf)
        else:
            a = np.asarray(tf)
            assert isinstance(a, np.ndarray) and np.array_equal(a, ref.numpy())
            assert np.asarray(tf, dtype=np.float64).dtype == np.float64
            if np.lib.NumpyVersion(np.__version__) >= "2.0.0":
                with pytest.raises(ValueError, match="copy=False"):
                    np.asarray(tf, copy=False)
    with TensorFile.create(tmp_path / "e.npy", (0, 4), dtype) as tf:
        assert torch.as_tensor(tf).shape == (0, 4)


def test_whole_table_larger_than_memory_is_refused(tmp_path):
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        tf = TensorFile.create(tmp_path / "big.npy", (ram // 4096 + 1, 4096), "uint8")  # sparse
    except OSError as e:
        pytest.skip(f"this file system cannot hold a sparse file of {ram} bytes: {e}")
    with tf:
        for conv in (np.asarray, torch.as_tensor):
            with pytest.raises(MemoryError) as ei:
                conv(tf)
            assert "\n" not in str(ei.value) and "tf[a:b]" in str(ei.value) and str(tf.nbytes) in str(ei.value)
        assert tf.stats()["blocks_read"] == 0, "a refused conversion read data"


def test_header_readers_agree_on_numpy_2_and_1(tmp_path):
    """The header bytes gpuio writes for bfloat16 are read by NumPy's parser as plain uint16 (the venv's NumPy;
    NumPy 1.26 and 2.x parse headers the same way, with ast.literal_eval, which skips the comment)."""
    import ast
    TensorFile.create(tmp_path / "b.npy", (2, 3), "bfloat16").close()
    raw = open(tmp_path / "b.npy", "rb").read(4096)
    text = raw[10:].decode("latin1")
    assert ast.literal_eval(text) == {"descr": "<u2", "fortran_order": False, "shape": (2, 3)}
    f = io.BytesIO(raw)
    np.lib.format.read_magic(f)
    assert np.lib.format.read_array_header_1_0(f) == ((2, 3), False, np.dtype("<u2"))


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
def test_unsigned_tables_move_every_value(tmp_path, dtype):
    """torch's uint16/32/64 lack the indexing kernels gathers and scatters use: the bytes move as the signed
    type of the same size, and the values come back whole."""
    a = np.random.default_rng(SEED).integers(0, np.iinfo(dtype).max, (300, 5), dtype=dtype, endpoint=True)
    with TensorFile.create(tmp_path / "u.npy", a.shape, dtype) as tf:
        tf[:] = a
        tf.scatter([3], a[4:5], exact=True)
        a[3] = a[4]
        assert np.array_equal(np.asarray(tf), a)
        assert np.array_equal(tf[[5, 1, 5]].numpy(), a[[5, 1, 5]])
        assert np.array_equal(tf.gather_pages([1], 7).numpy()[0], a[7:14])


@pytest.mark.parametrize("dtype,value", [("uint64", torch.tensor([-1])), ("int8", torch.tensor([200], dtype=torch.uint8)),
                                         ("int64", torch.tensor([2 ** 63], dtype=torch.uint64))])
def test_exact_scatter_sees_integer_wrap_around(tmp_path, dtype, value):
    """Values that wrap come back equal after the round trip, yet are stored as another number."""
    with TensorFile.create(tmp_path / "w.npy", (2, 1), dtype) as tf:
        with pytest.raises(TypeError, match="changes to"):
            tf.scatter([0], value[None], exact=True)
        tf.scatter([0], value[None])  # the default casts (wraps) as torch does
        assert torch.equal(tf[0].view(torch.uint8), value.to(tf.torch_dtype).view(torch.uint8))
