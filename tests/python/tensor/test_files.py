"""gpuio.outputs (safe output) and TensorFile.create on top of it: never over a non-regular file, an existing
file only when told (or gpuio's own), free space checked first, written under a temporary name and renamed
when complete, so a failure (ENOSPC for real, an exception, Ctrl-C) leaves nothing behind."""
from __future__ import annotations

import errno
import os

import numpy as np
import pytest
import torch

from fs_util import KINDS, fill, kind_of, listing, non_regular, small_tmpfs
from gpuio import TensorFile, outputs


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("overwrite", [False, True])
def test_non_regular_is_never_written(tmp_path, kind, overwrite):
    p = non_regular(kind, tmp_path)
    before, mode = listing(tmp_path), kind_of(p)
    reader = os.open(p, os.O_RDONLY | os.O_NONBLOCK) if kind == "fifo" else None  # a buggy writer won't block
    try:
        with pytest.raises(outputs.OutputRefused, match="not a regular file") as ei:
            with outputs.atomic_output(p, overwrite=overwrite) as tmp:
                open(tmp, "w").write("x")
        assert not ei.value.forceable and ei.value.filename == str(p)
        with pytest.raises(outputs.OutputRefused, match="not a regular file"):
            TensorFile.create(p, (4, 4), overwrite=overwrite)
        if reader is not None:
            assert os.read(reader, 1) == b""  # nothing was written into the fifo
    finally:
        if reader is not None:
            os.close(reader)
    assert kind_of(p) == mode and listing(tmp_path) == before


def test_existing_file_only_with_overwrite_or_ours(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("mine")
    with pytest.raises(outputs.OutputRefused, match=r"exists \(4 bytes\).*overwrite=True") as ei:
        outputs.write_text(p, "new")
    assert ei.value.forceable and ei.value.errno == errno.EEXIST
    assert p.read_text() == "mine"
    outputs.write_text(p, "new", ours=lambda path: open(path).read() == "mine")  # recognised as ours
    assert p.read_text() == "new"
    os.chmod(p, 0o600)
    outputs.write_text(p, "newer", overwrite=True)
    assert p.read_text() == "newer" and listing(tmp_path) == ["notes.txt"]
    assert os.stat(p).st_mode & 0o777 == 0o600  # a replaced file keeps its permissions
    empty = tmp_path / "empty"
    empty.touch()  # holds nothing to lose
    outputs.write_text(empty, "x")
    assert empty.read_text() == "x"


def test_symlink_to_a_regular_file_replaces_the_file_and_keeps_the_link(tmp_path):
    target, link = tmp_path / "real.npy", tmp_path / "link.npy"
    target.write_bytes(b"old")
    link.symlink_to(target)
    TensorFile.create(link, (3, 2), overwrite=True).close()
    assert link.is_symlink() and np.load(target).shape == (3, 2)


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_a_failure_inside_leaves_nothing_and_the_old_file_intact(tmp_path, error):
    p = tmp_path / "out.json"
    p.write_text("old")
    with pytest.raises(type(error)):
        with outputs.atomic_output(p, overwrite=True) as tmp:
            assert os.path.dirname(tmp) == str(tmp_path) and outputs.TEMP_TAG in tmp and tmp.endswith(".json")
            open(tmp, "w").write("half")
            raise error
    assert p.read_text() == "old" and listing(tmp_path) == ["out.json"]


def test_enospc_for_real_leaves_nothing_and_the_old_file_intact(tmp_path):
    with small_tmpfs(tmp_path / "fs", 8 << 20) as fs:
        p = fs / "t.npy"
        TensorFile.create(p, (64, 1024), "float32").close()  # 256 KiB: an old file to keep
        with pytest.raises(OSError) as ei:
            with outputs.atomic_output(p, overwrite=True) as tmp:
                with open(tmp, "wb") as f:
                    while True:
                        f.write(b"\x01" * (1 << 20))
        assert ei.value.errno == errno.ENOSPC
        assert listing(fs) == ["t.npy"] and np.load(p).shape == (64, 1024)


def test_enospc_mid_scatter_leaves_no_tensor_file(tmp_path):
    """A TensorFile written under atomic_output (what `gpuio import` does) whose rows no longer fit."""
    with small_tmpfs(tmp_path / "fs", 8 << 20) as fs:
        with pytest.raises(OSError) as ei:
            with outputs.atomic_output(fs / "x.npy", need_bytes=4 << 20) as tmp, \
                    TensorFile.create(tmp, (1024, 1024), "float32", overwrite=True) as tf:
                tf[0:256] = torch.ones(256, 1024)
                fill(fs)  # another writer takes the rest of the space
                tf[256:] = torch.ones(768, 1024)
        assert ei.value.errno == errno.ENOSPC, ei.value
        assert listing(fs) == ["filler"]


def test_free_space_is_checked_before_anything_is_created(tmp_path):
    with pytest.raises(OSError) as ei:
        TensorFile.create(tmp_path / "huge.npy", (10**15, 8))
    assert ei.value.errno == errno.ENOSPC
    assert "needs 32000000000004096 bytes" in str(ei.value) and "available" in str(ei.value)
    assert listing(tmp_path) == []
    with small_tmpfs(tmp_path / "fs", 8 << 20) as fs:
        with pytest.raises(OSError, match="needs") as ei:
            TensorFile.create(fs / "big.npy", (16, 1 << 20), "uint8")
        assert ei.value.errno == errno.ENOSPC and listing(fs) == []


def test_create_whose_engine_fails_leaves_nothing(tmp_path):
    with pytest.raises(ValueError, match="workers"):
        TensorFile.create(tmp_path / "t.npy", (4, 4), workers=10**6)
    assert listing(tmp_path) == []


def test_fsync_path_syncs_a_file_a_folder_or_the_data_and_names_a_missing_path(tmp_path):
    """gpuio.outputs.fsync_path is the one fsync helper (the writers' and the applications' timed saves): it
    opens, syncs and closes (no descriptor left behind), and a path that is not there is the OS's own error."""
    f = tmp_path / "f.bin"
    f.write_bytes(b"x" * 4096)
    before = len(os.listdir("/proc/self/fd"))
    outputs.fsync_path(f)
    outputs.fsync_path(f, data_only=True)
    outputs.fsync_path(tmp_path, directory=True)
    assert len(os.listdir("/proc/self/fd")) == before
    with pytest.raises(NotADirectoryError):
        outputs.fsync_path(f, directory=True)
    with pytest.raises(FileNotFoundError, match="gone"):
        outputs.fsync_path(tmp_path / "gone")
