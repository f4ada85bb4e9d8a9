"""StreamStore open/create semantics: opening never formats a file by accident, and a store is
created only when asked (mode="c" or "w"), never as a silent 1 GiB file."""
from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from gpuio.streams import StreamStore
from gpuio.streams.format import StreamStoreCorrupt
from streams_util import SMALL, read_all, write_all


def _user_file(path) -> bytes:
    """4 KiB of zeros followed by 8 MiB of data: the file the issue's user lost."""
    data = bytes(4096) + np.random.default_rng(1).integers(0, 256, 8 << 20, dtype=np.uint8).tobytes()
    path.write_bytes(data)
    return data


def test_default_open_never_creates(tmp_path):
    p = tmp_path / "s.bin"
    with pytest.raises(FileNotFoundError, match="mode='c'") as ei:
        StreamStore(str(p), **SMALL)
    assert ei.value.errno == errno.ENOENT
    assert not p.exists()  # no silent (sparse) file left behind


@pytest.mark.parametrize("mode", ["r+", "c"])
def test_zero_headed_user_file_is_refused_and_untouched(tmp_path, mode):
    p = tmp_path / "z.bin"
    data = _user_file(p)
    with pytest.raises(StreamStoreCorrupt, match="not a gpuio stream store .*all zeros.*mode='w'"):
        StreamStore(str(p), mode=mode, **SMALL)
    assert p.read_bytes() == data


@pytest.mark.parametrize("mode", ["r+", "c"])
def test_other_content_is_refused(tmp_path, mode):
    p = tmp_path / "junk.bin"
    p.write_bytes(b"not a store" * 1000)
    with pytest.raises(StreamStoreCorrupt, match="not a gpuio stream store"):
        StreamStore(str(p), mode=mode, **SMALL)
    assert p.read_bytes() == b"not a store" * 1000


def test_mode_w_formats_what_is_there(tmp_path):
    p = tmp_path / "z.bin"
    _user_file(p)
    size = p.stat().st_size
    with StreamStore(str(p), mode="w", **SMALL) as st:
        sid = write_all(st, [b"abc", np.arange(5)])
    assert p.stat().st_size == size  # formatted in place at its size, not resized
    with StreamStore(str(p), **SMALL) as st:  # now a store: the default mode opens it
        got = read_all(st, sid)
        assert got[0] == b"abc" and np.array_equal(got[1], np.arange(5))
    with StreamStore(str(p), mode="w", **SMALL) as st:  # "w" always starts a new, empty store
        assert st.streams() == []


def test_mode_c_creates_the_stated_size_then_reopens(tmp_path):
    p = tmp_path / "s.bin"
    with StreamStore(str(p), mode="c", create_bytes=4 << 20, **SMALL) as st:
        sid = write_all(st, [b"kept"])
    assert p.stat().st_size == 4 << 20
    with StreamStore(str(p), mode="c", create_bytes=64 << 20, **SMALL) as st:  # an existing store: opened
        assert read_all(st, sid) == [b"kept"]
    assert p.stat().st_size == 4 << 20
    empty = tmp_path / "empty.bin"
    empty.touch()  # a 0-byte file holds nothing to lose: "c" makes it a store
    with StreamStore(str(empty), mode="c", create_bytes=4 << 20, **SMALL) as st:
        assert st.streams() == []


def test_failed_create_leaves_no_file(tmp_path):
    p = tmp_path / "tiny.bin"
    # one sblock is too small for a 2048-stream table: formatting fails, the new file goes away again
    with pytest.raises(ValueError, match="too small"):
        StreamStore(str(p), mode="c", create_bytes=16384, **dict(SMALL, streams_max=1 << 20))
    assert not p.exists()


def test_bad_mode(tmp_path):
    with pytest.raises(ValueError, match="mode must be one of"):
        StreamStore(str(tmp_path / "s.bin"), mode="a", **SMALL)
    assert not os.path.exists(tmp_path / "s.bin")
