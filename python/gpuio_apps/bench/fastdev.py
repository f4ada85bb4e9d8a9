"""The fast device: a RAM-backed loop device with ext4, beside the disk (BENCHMARKS.md "The fast device").

A file on /dev/shm (tmpfs), preallocated in full, attached as a loop device with direct I/O to its backing file,
ext4 made on it and mounted. The one implementation behind the GPU runner's GPUIO_DEVICE=fast
(benchmarks/gpu/lib.sh runs `python -m gpuio_apps.bench.fastdev make|remove`), the tests' `fast_device` fixture
(tests/python/conftest.py) and the benchmarks that name the storage they ran on (`storage_of`).

    with fastdev.make("/mnt/gpuio-fast", need_bytes=10 << 30) as dev:   # sized from free RAM, at most the need
        ...files under dev.mount...                                    # removed at the end, even on an error

Memory: the image is preallocated (posix_fallocate) by the process that makes it, so its tmpfs pages are charged
to that process's memory cgroup, not to a benchmark's that writes files on it later (the loop device writes into
pages already there); start `make` outside a benchmark's cgroup. Dropping the page cache empties the ext4 file's
cache, not the tmpfs pages below it: a cold read still reads the device. Needs root, losetup, mkfs.ext4 and loop
support; `unusable()` says in one line why not.

    python -m gpuio_apps.bench.fastdev check                     # "ok: ..." (exit 0) or why not (exit 3)
    python -m gpuio_apps.bench.fastdev make --mount /mnt/gpuio-fast --need-gib 10   # prints the device's line
    python -m gpuio_apps.bench.fastdev remove --mount /mnt/gpuio-fast
    python -m gpuio_apps.bench.fastdev storage PATH              # the storage PATH is on, in words
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass

GIB = 1 << 30
SHM = "/dev/shm"
IMAGE = f"{SHM}/gpuio-fast.img"     # the GPU runner's image (one per machine; the tests' images carry a pid)
RESERVE_MIN = 8 * GIB                # RAM left for page cache and pinned buffers: at least this ...
RESERVE_SHARE = 0.25                 # ... or this share of MemTotal, whichever is more
SHM_SPARE = 1 * GIB                  # /dev/shm space left to others
TOOLS = ("losetup", "mkfs.ext4", "mount", "umount")


class FastDeviceError(RuntimeError):
    """A fast device cannot be made or removed here; the message is one line saying why."""


@dataclass
class FastDevice:
    image: str
    loop: str
    mount: str
    size_bytes: int
    direct_io: bool

    def describe(self) -> str:
        return (f"fast device: loop over tmpfs, ext4 ({self.loop}, {self.size_bytes / GIB:.1f} GiB in {self.image}, "
                f"direct-io {'on' if self.direct_io else 'off'})")

    def remove(self) -> list[str]:
        return remove(self.mount, self.image)

    def __enter__(self) -> "FastDevice":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _meminfo() -> dict[str, int]:
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            out[k] = int(v.split()[0]) * 1024
    return out


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode:
        raise FastDeviceError(f"{' '.join(cmd)} failed (exit {r.returncode}): "
                              f"{(r.stderr.strip().splitlines() or ['no message'])[-1]}")
    return r


def unusable() -> str | None:
    """Why no fast device can be made here (one line), or None."""
    if os.geteuid() != 0:
        return "the fast device needs root (losetup, mount)"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return f"the fast device needs {', '.join(missing)} (util-linux, e2fsprogs)"
    if not os.path.exists("/dev/loop-control") and not os.path.exists("/dev/loop0"):
        return "no loop device support (/dev/loop-control is absent: modprobe loop)"
    fs = _findmnt("FSTYPE", SHM) if shutil.which("findmnt") else "?"
    if fs != "tmpfs":
        return f"{SHM} is not tmpfs ({fs or 'not mounted'}): the fast device lives in RAM there"
    return None


def room() -> tuple[int, str]:
    """(bytes a fast device may take, how that was reckoned): MemAvailable less the reserve (page cache and pinned
    buffers: RESERVE_MIN or RESERVE_SHARE of MemTotal), and /dev/shm's free space less SHM_SPARE."""
    m = _meminfo()
    reserve = max(RESERVE_MIN, int(RESERVE_SHARE * m["MemTotal"]))
    shm_free = shutil.disk_usage(SHM).free
    ram = m["MemAvailable"] - reserve
    why = (f"MemAvailable {m['MemAvailable'] / GIB:.1f} GiB less {reserve / GIB:.1f} GiB kept for page cache and "
           f"pinned buffers; {SHM} {shm_free / GIB:.1f} GiB free")
    return max(0, min(ram, shm_free - SHM_SPARE)), why


def plan(size_bytes: int | None = None, need_bytes: int | None = None) -> tuple[int, str]:
    """The image's size: size_bytes when given (refused beyond the room), else the room capped at need_bytes
    (the data the caller writes, plus ext4's overhead) -- or at 16 GiB with no need given. (bytes, note)."""
    avail, why = room()
    if size_bytes is not None:
        if size_bytes < 64 << 20:
            raise FastDeviceError(f"size {size_bytes} bytes: a fast device needs at least 64 MiB")
        if size_bytes > avail:
            raise FastDeviceError(f"size {size_bytes / GIB:.1f} GiB does not fit in RAM: room for "
                                  f"{avail / GIB:.1f} GiB ({why})")
        return size_bytes, f"{size_bytes / GIB:.1f} GiB as asked; room for {avail / GIB:.1f} GiB ({why})"
    want = int((need_bytes if need_bytes else 16 * GIB) * 1.04) + (256 << 20)  # ext4: inode tables, journal
    want = -(-want // (1 << 20)) * (1 << 20)
    if avail < 256 << 20:
        raise FastDeviceError(f"no RAM to spare for a fast device ({why})")
    size = min(want, avail)
    note = f"{size / GIB:.1f} GiB ({why})"
    if size < want:
        note += f"; {want / GIB:.1f} GiB wanted: what does not fit is skipped or fails for want of space"
    return size, note


def _state_path(image: str) -> str:
    return image + ".json"


def _loops_of(image: str) -> list[str]:
    """The loop devices backed by `image` (also one whose image was deleted under it)."""
    out = []
    for name in sorted(os.listdir("/sys/block")) if os.path.isdir("/sys/block") else []:
        back = _read(f"/sys/block/{name}/loop/backing_file") if name.startswith("loop") else ""
        if back and back.removesuffix(" (deleted)") == os.path.abspath(image):
            out.append(f"/dev/{name}")
    return out


def _findmnt(field: str, target: str) -> str:
    """FIELD of the file system holding `target` (the topmost where mounts are stacked)."""
    r = _run("findmnt", "-n", "-o", field, "--target", target, check=False)
    lines = r.stdout.strip().splitlines()
    return lines[-1].strip() if lines else ""


def _mounted_source(mount: str) -> str | None:
    r = _run("findmnt", "-n", "-o", "SOURCE", "--mountpoint", mount, check=False)
    lines = r.stdout.strip().splitlines()
    return lines[-1].strip() if lines else None


def make(mount: str, size_bytes: int | None = None, need_bytes: int | None = None, image: str = IMAGE,
         direct_io: bool = True) -> FastDevice:
    """Make the fast device (first removing one a killed run left at the same image or mount point) and mount it
    at `mount`. On any failure what was made is removed again and FastDeviceError says why."""
    why = unusable()
    if why:
        raise FastDeviceError(why)
    remove(mount, image)  # a run killed outright (SIGKILL) left it: start from nothing
    size, _ = plan(size_bytes, need_bytes)
    loop = None
    try:
        fd = os.open(image, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:  # every page now, charged to this process's cgroup (not to a benchmark's that writes later)
            os.posix_fallocate(fd, 0, size)
        except OSError as e:
            raise FastDeviceError(f"cannot allocate {size / GIB:.1f} GiB in {SHM}: {e.strerror}") from None
        finally:
            os.close(fd)
        args = ["losetup", "-f", "--show"] + (["--direct-io=on"] if direct_io else []) + [image]
        loop = _run(*args).stdout.strip()
        dio = _read(f"/sys/block/{os.path.basename(loop)}/loop/dio") == "1"
        # nodiscard: a discard would punch holes in the preallocated image; the inode tables and journal written
        # now, not by ext4lazyinit during a measurement
        _run("mkfs.ext4", "-q", "-F", "-E", "nodiscard,lazy_itable_init=0,lazy_journal_init=0", loop)
        os.makedirs(mount, exist_ok=True)
        _run("mount", "-t", "ext4", loop, mount)
        dev = FastDevice(image=image, loop=loop, mount=os.path.abspath(mount), size_bytes=size, direct_io=dio)
        with open(_state_path(image), "w") as f:
            json.dump(asdict(dev), f)
        return dev
    except BaseException:
        remove(mount, image)
        raise


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def remove(mount: str | None = None, image: str = IMAGE) -> list[str]:
    """Unmount, detach and delete, whatever of it is there; what was done. A mount still in use is detached
    lazily (it goes when its last user does) and its loop device set to detach itself then, so nothing leaks."""
    done = []
    try:
        with open(_state_path(image)) as f:
            mount = mount or json.load(f)["mount"]
    except (OSError, ValueError, KeyError):
        pass
    loops = set(_loops_of(image))
    if mount and _mounted_source(mount):
        if _mounted_source(mount) in loops:  # only our image's device: never another file system at that path
            if _run("umount", mount, check=False).returncode == 0:
                done.append(f"unmounted {mount}")
            else:
                _run("umount", "-l", mount)
                done.append(f"unmounted {mount} lazily (in use)")
    for loop in sorted(loops):
        if _run("losetup", "-d", loop, check=False).returncode == 0:
            done.append(f"detached {loop}")
    for p in (image, _state_path(image)):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)
            done.append(f"removed {p}")
    return done


def storage_of(path: str) -> str:
    """The storage under `path` in words: "fast device: loop over tmpfs, ext4 (...)" for a loop device backed by
    a tmpfs file, "tmpfs", or "<kind> disk (<device>, <fs>)"."""
    target = path if os.path.exists(path) else os.path.dirname(os.path.abspath(path)) or "."
    src, fs = _findmnt("SOURCE", target), _findmnt("FSTYPE", target)
    if fs == "tmpfs":
        return "tmpfs (RAM)"
    name = os.path.basename(src)
    if name.startswith("loop"):
        back = _read(f"/sys/block/{name}/loop/backing_file")
        dio = _read(f"/sys/block/{name}/loop/dio") == "1"
        on = _findmnt("FSTYPE", os.path.dirname(back) or "/")
        if on == "tmpfs":
            return f"fast device: loop over tmpfs, {fs} ({src}, direct-io {'on' if dio else 'off'})"
        return f"loop device over {back or '?'} ({fs})"
    base = name.rstrip("0123456789") if not name.startswith("nvme") else name.split("p")[0]
    kind = "virtio disk" if base.startswith("vd") else ("NVMe disk" if base.startswith("nvme") else "disk")
    rota = _read(f"/sys/block/{base}/queue/rotational")
    if kind == "disk" and rota in ("0", "1"):
        kind = "SSD" if rota == "0" else "rotating disk"
    return f"{kind} ({src or '?'}, {fs or '?'})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gpuio_apps.bench.fastdev", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("check", help="whether a fast device can be made here, and how large")
    mk = sub.add_parser("make", help="make and mount one (a previous one at the same image or mount is removed)")
    rm = sub.add_parser("remove", help="unmount, detach and delete it")
    for p in (mk, rm):
        p.add_argument("--mount", default="/mnt/gpuio-fast", help="mount point")
        p.add_argument("--image", default=IMAGE, help=f"backing file on tmpfs (default {IMAGE})")
    mk.add_argument("--gib", type=float, default=None, help="size in GiB (default: from free RAM, at most the need)")
    mk.add_argument("--need-gib", type=float, default=None, help="GiB of data the caller will write (sizes it)")
    mk.add_argument("--no-direct-io", action="store_true", help="the loop device reads its backing file buffered")
    st = sub.add_parser("storage", help="the storage a path is on, in words")
    st.add_argument("path")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "check":
            why = unusable()
            if why:
                print(f"fastdev: {why}", file=sys.stderr)
                return 3
            size, note = room()
            print(f"ok: room for a fast device of up to {size / GIB:.1f} GiB ({note})")
        elif a.cmd == "make":
            for opt, v in (("--gib", a.gib), ("--need-gib", a.need_gib)):
                if v is not None and not v > 0:
                    ap.error(f"{opt} {v:g}: give a positive number of GiB")
            if a.image and not os.path.dirname(os.path.abspath(a.image)).startswith(SHM):
                ap.error(f"--image {a.image!r}: the backing file goes on {SHM} (tmpfs)")
            dev = make(a.mount, size_bytes=int(a.gib * GIB) if a.gib else None,
                       need_bytes=int(a.need_gib * GIB) if a.need_gib else None, image=a.image,
                       direct_io=not a.no_direct_io)
            print(f"{dev.describe()} at {dev.mount}")
        elif a.cmd == "remove":
            print("; ".join(remove(a.mount, a.image)) or "nothing to remove")
        else:
            print(storage_of(a.path))
    except FastDeviceError as e:
        print(f"fastdev: error: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
