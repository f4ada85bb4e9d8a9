"""`gpuio import` keeps the element type bit for bit: float16 .npy, bfloat16 and float16 .pt, raw data with
--dtype bfloat16, a gpuio bfloat16 .npy imported again; uint16 stays uint16; element types gpuio cannot store
are refused in one line naming the file or the option."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from gpuio._npy import read_header
from gpuio_apps.cli import main
from gpuio.tensor import TensorFile

SHAPE = (300, 19)  # 38-byte float16 rows: rows straddle blocks


@pytest.fixture
def bits(tmp_path, monkeypatch):
    """Random 16-bit words (NaN payloads, infinities, subnormals, -0), as int16, in tmp_path as the cwd."""
    monkeypatch.chdir(tmp_path)
    return torch.from_numpy(np.random.default_rng(7).integers(-32768, 32768, SHAPE, dtype=np.int16))


def _import(capsys, *argv) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ei:
        main(["import", *argv])
    return ei.value.code, capsys.readouterr().err


def _words(path, block_size=4096) -> tuple[torch.dtype, torch.Tensor]:
    with TensorFile.open(path, block_size=block_size) as tf:
        return tf.torch_dtype, tf[:].view(torch.int16)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_pt_half_types_import_bit_exact(bits, capsys, dtype):
    torch.save(bits.view(dtype), "src.pt")
    code, err = _import(capsys, "src.pt", "dst.npy")
    assert code == 0, err
    got_dtype, got = _words("dst.npy")
    assert got_dtype == dtype and torch.equal(got, bits)
    a = np.load("dst.npy", mmap_mode="r")  # bfloat16: NumPy reads the words as uint16; float16 natively
    assert a.dtype == (np.uint16 if dtype == torch.bfloat16 else np.float16)
    assert np.array_equal(a.view(np.int16), bits.numpy())


def test_npy_float16_imports_bit_exact(bits, capsys):
    np.save("src.npy", bits.numpy().view(np.float16))
    code, err = _import(capsys, "src.npy", "dst.npy")
    assert code == 0, err
    got_dtype, got = _words("dst.npy")
    assert got_dtype == torch.float16 and torch.equal(got, bits)


@pytest.mark.parametrize("spelling", ["bfloat16", "torch.bfloat16"])
def test_raw_words_with_dtype_bfloat16(bits, capsys, spelling):
    bits.numpy().tofile("raw.bin")
    code, err = _import(capsys, "raw.bin", "dst.npy", "--dtype", spelling, "--shape", f"{SHAPE[0]},-1")
    assert code == 0, err
    got_dtype, got = _words("dst.npy")
    assert got_dtype == torch.bfloat16 and torch.equal(got, bits)


def test_gpuio_bfloat16_npy_stays_bfloat16_on_reimport(bits, capsys):
    torch.save(bits.view(torch.bfloat16), "src.pt")
    assert _import(capsys, "src.pt", "a.npy")[0] == 0
    code, err = _import(capsys, "a.npy", "b.npy", "--block-size", "8192")  # read by the .npy path
    assert code == 0, err
    assert read_header("b.npy").element == "bfloat16"
    got_dtype, got = _words("b.npy", 8192)
    assert got_dtype == torch.bfloat16 and torch.equal(got, bits)


def test_uint16_and_big_endian_sources(bits, capsys):
    np.save("u.npy", bits.numpy().view(np.uint16))
    assert _import(capsys, "u.npy", "u_out.npy")[0] == 0
    assert read_header("u_out.npy").element is None
    with TensorFile.open("u_out.npy") as tf:
        assert tf.torch_dtype == torch.uint16 and torch.equal(tf[:].view(torch.int16), bits)
    big = np.arange(40, dtype=">f4").reshape(4, 10) / 7
    np.save("big.npy", big)
    assert _import(capsys, "big.npy", "big_out.npy")[0] == 0
    with TensorFile.open("big_out.npy") as tf:  # values kept, stored little-endian
        assert tf.torch_dtype == torch.float32 and np.array_equal(np.asarray(tf), big)
    assert np.load("big_out.npy").dtype.str == "<f4"


@pytest.mark.parametrize("make,argv,option,text", [
    (lambda: torch.save(torch.zeros(3, dtype=torch.float8_e4m3fn), "f8.pt"), ["f8.pt", "o.npy"], "SRC",
     "'f8.pt': holds a torch.float8_e4m3fn tensor"),
    (lambda: np.zeros(8, np.uint8).tofile("r.bin"), ["r.bin", "o.npy", "--dtype", "float8"], "--dtype", "'float8'"),
    (lambda: np.zeros(8, np.uint8).tofile("r.bin"), ["r.bin", "o.npy", "--dtype", "torch.nope"], "--dtype",
     "'torch.nope'"),
    (lambda: np.zeros(8, np.uint8).tofile("r.bin"), ["r.bin", "o.npy", "--dtype", ">f4"], "--dtype", "big-endian"),
])
def test_bad_element_types_are_one_line(bits, capsys, make, argv, option, text):
    make()
    code, err = _import(capsys, *argv)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert option in err and text in err, err
    assert not os.path.exists("o.npy")


def test_npy_naming_an_unknown_element_type_is_one_line(bits, capsys):
    TensorFile.create("x.npy", (4,), "bfloat16").close()
    raw = bytearray(open("x.npy", "rb").read())
    at = raw.index(b"bfloat16")
    raw[at:at + 8] = b"float8  "
    open("x.npy", "wb").write(raw)
    code, err = _import(capsys, "x.npy", "o.npy")
    assert code == 2 and len(err.splitlines()) == 1 and "SRC" in err and "'float8'" in err, err
