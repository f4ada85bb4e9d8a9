"""The fast device (gpuio_apps.bench.fastdev: where the engine, not the disk, is the bound): the engine reads O_DIRECT
from a file on the RAM-backed loop device with the file's bytes; the device is made and removed without leaving a
mount, a loop device or an image behind, also when its user fails; sizes that cannot be are refused in one line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import gpuio
from gpuio import aligned_empty
from gpuio_apps.bench import fastdev
from repo_scripts import ROOT

BS = 4096


def test_engine_reads_o_direct_from_a_file_on_the_fast_device(fast_device):
    assert fastdev.storage_of(fast_device.mount).startswith("fast device: loop over tmpfs, ext4 (/dev/loop")
    data = np.frombuffer(np.random.default_rng(39).bytes(64 << 20), np.uint8)
    path = os.path.join(fast_device.mount, "data.bin")
    with open(path, "wb") as f:
        f.write(data.tobytes())
        os.fsync(f.fileno())
    os.posix_fadvise(os.open(path, os.O_RDONLY), 0, 0, os.POSIX_FADV_DONTNEED)
    blocks = np.random.default_rng(7).permutation(len(data) // BS)[:4096].astype(np.int64)
    with gpuio.Engine(path, workers=2) as eng:
        out = aligned_empty(len(blocks) * BS)
        eng.read(blocks, out)
        dp = eng.stats()["data_path"]
        assert dp.startswith("uring+") and "pagecache" not in dp, dp  # O_DIRECT (straight or staged), not buffered
    want = data.reshape(-1, BS)[blocks]
    bad = np.flatnonzero((out.reshape(-1, BS) != want).any(axis=1))
    assert bad.size == 0, f"blocks {blocks[bad[:5]].tolist()} read back wrong"
    os.unlink(path)


def _leftovers(image: str, mount: str) -> list[str]:
    out = [f"loop {d}" for d in fastdev._loops_of(image)]
    out += [f"file {p}" for p in (image, image + ".json") if os.path.exists(p)]
    if fastdev._mounted_source(mount):
        out.append(f"mount {mount}")
    return out


def test_make_and_remove_leave_nothing_behind_even_when_the_user_fails(tmp_path):
    why = fastdev.unusable()
    if why:
        pytest.skip(why)
    image, mount = f"{fastdev.SHM}/gpuio-fast-test-{os.getpid()}-life.img", str(tmp_path / "m")
    with pytest.raises(ZeroDivisionError):
        with fastdev.make(mount, size_bytes=128 << 20, image=image) as dev:
            assert dev.direct_io and os.path.getsize(image) == 128 << 20
            assert fastdev._mounted_source(mount) == dev.loop
            f = open(os.path.join(mount, "held-open"), "w")  # a user still holding a file: removed lazily
            1 / 0
    # unmounted and deleted; the loop device, still in use through the open file, detaches itself when it is not
    assert [x for x in _leftovers(image, mount) if not x.startswith("loop")] == []
    for loop in fastdev._loops_of(image):
        assert fastdev._read(f"/sys/block/{os.path.basename(loop)}/loop/autoclear") == "1"
    f.close()
    for _ in range(50):
        if not fastdev._loops_of(image):
            break
        time.sleep(0.1)
    assert _leftovers(image, mount) == []
    # a killed run's device (made, never removed) is cleared by the next make at the same image and mount
    stale = fastdev.make(mount, size_bytes=128 << 20, image=image)
    again = fastdev.make(mount, size_bytes=128 << 20, image=image)
    assert fastdev._loops_of(image) == [again.loop]  # the stale one detached, whatever number the new one got
    again.remove()
    assert _leftovers(image, mount) == []


@pytest.mark.parametrize("args,message", [(["make", "--gib", "0"], "--gib 0: give a positive number of GiB"),
                                          (["make", "--image", "/tmp/x.img"],
                                           "--image '/tmp/x.img': the backing file goes on /dev/shm"),
                                          (["frob"], "invalid choice: 'frob'")])
def test_bad_arguments_are_refused_in_one_line(args, message):
    r = subprocess.run([sys.executable, "-m", "gpuio_apps.bench.fastdev", *args], capture_output=True, text=True)
    assert r.returncode == 2 and message in r.stderr.splitlines()[-1]


def test_a_size_beyond_ram_is_refused_naming_the_room():
    if fastdev.unusable():
        pytest.skip(fastdev.unusable())
    r = subprocess.run([sys.executable, "-m", "gpuio_apps.bench.fastdev", "make", "--mount", "/tmp/gpuio-fast-never",
                        "--image", f"{fastdev.SHM}/gpuio-fast-test-never.img", "--gib", "100000"],
                       capture_output=True, text=True)
    assert r.returncode == 3 and r.stderr.count("\n") == 1
    assert "does not fit in RAM" in r.stderr and "MemAvailable" in r.stderr
    assert not os.path.exists(f"{fastdev.SHM}/gpuio-fast-test-never.img")


def _gpu_sh(*args, env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GPUIO_", "GPU_", "BOUNDED_"))}
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu.sh"), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=180, env=dict(clean, **env))


def test_gpu_sh_runs_a_suite_on_each_device_named_in_its_rows(tmp_path):
    """GPUIO_DEVICE=both: the suite once on the disk, once on a fast device made for it and removed after; its data
    paths under the device's mount; every row names its device."""
    r = _gpu_sh("--dry-run", "weights", env={"GPUIO_DEVICE": "both", "OUT": str(tmp_path / "dry")})
    assert r.returncode == 0 and r.stderr == "", r.stderr
    disk, fast = r.stdout.split("# suite weights on the fast device")
    assert "--dir /var/tmp/gpuio-weights" in disk and "fastdev.py make --mount /mnt/gpuio-fast --need-gib 28" in fast
    assert "--dir /mnt/gpuio-fast/gpuio-weights" in fast
    assert fast.rstrip().endswith("fastdev.py remove --mount /mnt/gpuio-fast")
    if fastdev.unusable():
        pytest.skip(fastdev.unusable())
    out, mount = tmp_path / "out", str(tmp_path / "fast")
    r = _gpu_sh("build", env={"GPUIO_DEVICE": "disk,fast", "GPUIO_BUILD": "none", "GPUIO_PYTHON": sys.executable,
                              "GPUIO_FAST_GIB": "0.25", "GPUIO_FAST_MOUNT": mount, "GPUIO_RATES": "0", "OUT": str(out)})
    assert r.returncode == 0, r.stdout + r.stderr
    summary = (out / "summary.txt").read_text()
    assert "suites: build:ok build-fast:ok" in summary
    assert "fast = fast device: loop over tmpfs, ext4 (/dev/loop" in summary and "devices: disk = " in summary
    assert _leftovers(fastdev.IMAGE, mount) == []


def test_gpu_sh_refuses_a_device_it_does_not_know_in_one_line():
    r = _gpu_sh("check", env={"GPUIO_DEVICE": "disk,nvme"})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == "gpu.sh: error: GPUIO_DEVICE='disk,nvme': 'nvme' is not one of disk, fast, both"


def test_gather_rate_runs_on_the_fast_device_and_names_it(fast_device, tmp_path):
    """A benchmark's files on the fast device: gather_rate.py's rows checked against NumPy there, its storage line
    and JSON naming the fast device."""
    work, out = os.path.join(fast_device.mount, "gather"), tmp_path / "r.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gather_rate.py"), "--workdir", work, "--file-mib",
                        "2", "--rows", "96", "--batch", "40", "--repeats", "1", "--ref-seconds", "0.05",
                        "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith(f"storage: fast device: loop over tmpfs, ext4 ({fast_device.loop}, direct-io on)")
    assert json.loads(out.read_text())["storage"].startswith("fast device: loop over tmpfs")
