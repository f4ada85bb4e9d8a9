"""Image resize (GNStor Fig. 15): decoded images stored as raw tensors, resized bilinearly, written back.

The images are real photographs that Python packages ship (no network): scikit-image's sample data
(astronaut, coffee, chelsea, rocket, motorcycle, retina, Hubble deep field, ...) where scikit-image is
installed, and matplotlib's Grace Hopper portrait. `dataset()` makes as many images as the size asks
from them, each a seeded random crop (at least half the photo's shorter side), scaled to H x W with
Pillow and flipped at random, decoded to uint8 H x W x 3. They are stored back to back as one raw
[N, H, W, 3] tensor; a step reads a batch, resizes it on the device (torch bilinear, align_corners=False,
rounded to uint8) and writes the [B, h, w, 3] batch back, double-buffered (gpuio_apps.papers.pipeline).
Check: every output batch against the same resize of the in-memory images on the CPU (equal within 1
grey level: GPU float rounding). Baseline: the same steps over pread/pwrite + copy.

    python -m gpuio_apps.papers.resize --size small --device cuda --cold
"""
from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import torch

from . import common
from .pipeline import Step, measure_steps, resolve_device

SIZES = {  # images, input H x W, output h x w, batch (images per step)
    "tiny": dict(images=48, hw=64, out=32, batch=16),
    "small": dict(images=300, hw=256, out=128, batch=20),
    "medium": dict(images=1200, hw=512, out=256, batch=16),
    "large": dict(images=1000, hw=1024, out=512, batch=8),   # 3 GiB of decoded 1024^2 images
}
# scikit-image's shipped colour and grey photographs (files in skimage/data, no download)
SKIMAGE_PHOTOS = ("astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
                  "motorcycle_right.png", "hubble_deep_field.jpg", "retina.jpg", "ihc.png", "camera.png",
                  "moon.png", "coins.png", "brick.png", "grass.png", "gravel.png")


def _package_dir(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    return spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else None


def photo_paths() -> list[str]:
    """The real photographs available offline: scikit-image's sample data and matplotlib's."""
    out = []
    sk = _package_dir("skimage")
    if sk:
        out += [p for p in (os.path.join(sk, "data", f) for f in SKIMAGE_PHOTOS) if os.path.exists(p)]
    mpl = _package_dir("matplotlib")
    if mpl:
        p = os.path.join(mpl, "mpl-data", "sample_data", "grace_hopper.jpg")
        if os.path.exists(p):
            out.append(p)
    if not out:
        raise FileNotFoundError("no sample photographs found: install scikit-image or matplotlib "
                                "(pip install 'gpuio[apps]')")
    return out


def dataset(count: int, hw: int, seed: int = 0, start: int = 0) -> np.ndarray:
    """Images [start, start + count) of the set: uint8 [count, hw, hw, 3], seeded crops of the photos."""
    from PIL import Image

    photos = [Image.open(p).convert("RGB") for p in photo_paths()]
    out = np.empty((count, hw, hw, 3), dtype=np.uint8)
    for j in range(count):
        i = start + j
        rng = np.random.default_rng(seed * 1_000_003 + i)
        im = photos[i % len(photos)]
        side = min(im.size)
        c = int(rng.integers(side // 2, side + 1))
        x, y = int(rng.integers(0, im.size[0] - c + 1)), int(rng.integers(0, im.size[1] - c + 1))
        crop = im.crop((x, y, x + c, y + c)).resize((hw, hw), Image.BILINEAR)
        a = np.asarray(crop)
        out[j] = a[:, ::-1] if rng.integers(0, 2) else a
    return out


def resize_batch(x: torch.Tensor, out_hw: int) -> torch.Tensor:
    """uint8 [B, H, W, 3] -> uint8 [B, h, w, 3], bilinear (align_corners=False), rounded."""
    t = x.permute(0, 3, 1, 2).float()
    y = torch.nn.functional.interpolate(t, size=(out_hw, out_hw), mode="bilinear", align_corners=False)
    return y.round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()


class Resize:
    def __init__(self, images: int, hw: int, out: int, batch: int, seed: int = 0):
        self.images, self.hw, self.out, self.batch, self.seed = images, hw, out, batch, seed
        self.in_img, self.out_img = hw * hw * 3, out * out * 3
        for what, b in (("input", self.in_img), ("output", self.out_img)):
            if batch * b % 4096:
                raise ValueError(f"a batch of {batch} {what} images is {batch * b} bytes, not whole 4 KiB blocks; "
                                 "pick a batch or size that makes it so")

    def alloc(self, g, p) -> None:
        nb = -(-self.images // self.batch) * self.batch
        self.ext = {"images": common.alloc_both(g, p, "images", nb * self.in_img),
                    "resized": common.alloc_both(g, p, "resized", nb * self.out_img)}

    def prepare(self, store) -> None:
        self.data = dataset(self.images, self.hw, self.seed)
        for b0 in range(0, self.images, self.batch):
            x = torch.zeros((self.batch, self.hw, self.hw, 3), dtype=torch.uint8)
            chunk = torch.from_numpy(self.data[b0:b0 + self.batch])
            x[:chunk.shape[0]] = chunk
            store.write(self.ext["images"], b0 * self.in_img, x)

    def _compute(self, bufs):
        x = bufs[0].view(self.batch, self.hw, self.hw, 3)
        return [resize_batch(x, self.out)]

    def steps(self, store) -> list[Step]:
        return [Step(reads=[(self.ext["images"], b0 * self.in_img, self.batch * self.in_img)],
                     compute=self._compute, writes=[(self.ext["resized"], b0 * self.out_img)],
                     out_nbytes=[self.batch * self.out_img]) for b0 in range(0, self.images, self.batch)]

    def verify(self, store) -> str:
        worst = 0
        buf = torch.empty(self.batch * self.out_img, dtype=torch.uint8)
        for b0 in range(0, self.images, self.batch):
            store.read(self.ext["resized"], b0 * self.out_img, buf)
            n = min(self.batch, self.images - b0)
            got = buf.view(self.batch, self.out, self.out, 3)[:n]
            ref = resize_batch(torch.from_numpy(self.data[b0:b0 + n]), self.out)
            worst = max(worst, int((got.int() - ref.int()).abs().max()))
        if worst > 1:
            raise AssertionError(f"resize: output differs from the in-memory CPU resize by {worst} grey levels (> 1)")
        return f"ok ({self.images} images, max diff {worst} grey level(s))"


def run(size: str = "tiny", store=None, device: str = "auto", cold: bool = False, workers: int | None = None,
        keep: bool = False, **overrides) -> dict:
    prm = common.size_params(SIZES, size)
    prm.update(overrides)
    dev = resolve_device(device)
    store = store or common.default_store("resize")
    app = Resize(prm["images"], prm["hw"], prm["out"], prm["batch"])
    capacity = app.images * (app.in_img + app.out_img) + 2 * app.batch * app.in_img
    with common.opened_pair(store, capacity, workers, device=dev, keep=keep) as (g, p):
        app.alloc(g, p)
        app.prepare(g)
        return measure_steps("resize", size, g, p, app.steps, app.verify, dev, cold, "pread/pwrite+copy",
                             on=dev.type, images=app.images, photos=len(photo_paths()),
                             shape=f"{app.hw}->{app.out}")


def main(argv=None) -> int:
    ap = common.parser("resize", __doc__, SIZES)
    a = ap.parse_args(argv)
    r = run(a.size, a.store, a.device, a.cold, a.workers, a.keep)
    common.print_row(r)
    print(f"{r['images']} images ({r['shape']}) from {r['photos']} photographs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
