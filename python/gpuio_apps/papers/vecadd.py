"""Vector add (GNStor Fig. 14): c = a + b over two float64 vectors on storage, in 1 MiB batches.

Step i reads batch i of a and of b (1 MiB each by default), adds them on the device and writes batch i of
c; steps run DEPTH_DEFAULT (8) batches deep (gpuio_apps.papers.pipeline), since one 1 MiB request at a time
leaves the device idle between requests. I/O dominates: the ideal is the I/O time. The vectors are a
closed-form function of the index (exact in float64), so the check recomputes every batch of c without
holding a or b. Baseline: the same steps over pread/pwrite + copy. The raw device's
sequential read and write rates (gpuio_apps.bench's in-tree raw reference, O_DIRECT) are printed beside it
where the store is one file: the judged figure is vecadd bytes/s >= 0.9 x the raw read+write rate.

    python -m gpuio_apps.papers.vecadd --size large --device cuda --cold
"""
from __future__ import annotations

import sys

import torch

from . import common
from .pipeline import Step, buffer, measure_steps, resolve_device, write_padded

SIZES = {  # n: elements per vector; batch_bytes per vector per step
    "tiny": dict(n=1 << 18, batch_bytes=1 << 20),
    "small": dict(n=1 << 24, batch_bytes=1 << 20),
    "medium": dict(n=1 << 28, batch_bytes=1 << 20),
    "large": dict(n=10 ** 9, batch_bytes=1 << 20),   # GNStor's 1e9 elements, 8 GB per vector
}
ITEM = 8  # float64
DEPTH_DEFAULT = 8  # batches in flight (input slots of the pipeline)


def values(name: str, start: int, count: int, device="cpu") -> torch.Tensor:
    """Elements [start, start + count) of vector `name`: small integers and halves, exact in float64."""
    i = torch.arange(start, start + count, dtype=torch.int64, device=device)
    if name == "a":
        return (i % 1_000_003).double() * 0.25
    return ((i * 7) % 999_983).double() * 0.5 - 1000.0


class VecAdd:
    """device: where the vectors are made (prepare) and c is checked (verify); on CUDA both are seconds at
    1e9 elements, on the CPU they were most of the large run's wall time."""

    def __init__(self, n: int, batch_bytes: int, depth: int = DEPTH_DEFAULT, device="cpu"):
        if batch_bytes % 4096 or batch_bytes <= 0:
            raise ValueError(f"batch_bytes={batch_bytes} must be a positive multiple of 4096")
        self.n, self.batch, self.depth, self.device = n, batch_bytes // ITEM, depth, torch.device(device)
        self.vec_bytes = -(-n * ITEM // 4096) * 4096

    def alloc(self, g, p) -> None:
        self.ext = {m: common.alloc_both(g, p, m, self.vec_bytes) for m in "abc"}

    def _batches(self):
        for start in range(0, self.n, self.batch):
            count = min(self.batch, self.n - start)
            yield start, count, -(-count * ITEM // 4096) * 4096  # the last batch reads whole blocks

    def prepare(self, store) -> None:
        """a and b written from one aligned host buffer (O_DIRECT in place), made on self.device."""
        chunk = 1 << 24
        host = buffer(chunk * ITEM, torch.device("cpu"))
        for name in "ab":
            for start in range(0, self.n, chunk):
                count = min(chunk, self.n - start)
                write_padded(store, self.ext[name], start * ITEM, values(name, start, count, self.device), host)

    def _add(self, bufs):
        # into a ring of output buffers: a fresh 1 MiB host tensor per step costs its page faults each time
        # (measured ~10-20 ms per MiB on the 2-core box against 0.7 ms reused). A buffer comes round again
        # only after its write was waited for (the pipeline keeps `depth` write groups in flight at most).
        a, b = bufs[0].view(torch.float64), bufs[1].view(torch.float64)
        key = (a.device, a.numel())
        ring = self._ring.get(key)
        if ring is None:  # once per size: setdefault would build (and drop) depth + 2 buffers every step
            ring = self._ring[key] = [torch.empty_like(a) for _ in range(self.depth + 2)]
        self._turn = (self._turn + 1) % len(ring)
        return [torch.add(a, b, out=ring[self._turn])]

    def steps(self, store) -> list[Step]:
        self._ring, self._turn = {}, 0
        return [Step(reads=[(self.ext["a"], s * ITEM, nb), (self.ext["b"], s * ITEM, nb)], compute=self._add,
                     writes=[(self.ext["c"], s * ITEM)], out_nbytes=[nb]) for s, _, nb in self._batches()]

    def verify(self, store) -> str:
        chunk = 1 << (23 if self.device.type == "cuda" else 22)
        buf = buffer(chunk * ITEM, self.device)
        for start in range(0, self.n, chunk):
            count = min(chunk, self.n - start)
            nb = -(-count * ITEM // 4096) * 4096
            store.read(self.ext["c"], start * ITEM, buf[:nb])
            got = buf[:nb].view(torch.float64)[:count]
            want = values("a", start, count, self.device) + values("b", start, count, self.device)
            if not torch.equal(got, want):
                bad = int((got != want).nonzero()[0])
                raise AssertionError(f"vecadd: c[{start + bad}] = {float(got[bad])}, expected {float(want[bad])}")
        return f"ok (all {self.n} elements exact)"


def run(size: str = "tiny", store=None, device: str = "auto", cold: bool = False, workers: int | None = None,
        keep: bool = False, raw_seconds: float | None = None, **overrides) -> dict:
    prm = common.size_params(SIZES, size)
    prm.update(overrides)
    dev = resolve_device(device)
    store = store or common.default_store("vecadd")
    app = VecAdd(prm["n"], prm["batch_bytes"], prm.get("depth", DEPTH_DEFAULT), device=dev)
    with common.opened_pair(store, 3 * app.vec_bytes, workers, device=dev, keep=keep) as (g, p):
        app.alloc(g, p)
        app.prepare(g)
        r = measure_steps("vecadd", size, g, p, app.steps, app.verify, dev, cold, "pread/pwrite+copy",
                          depth=app.depth, on=dev.type, n=app.n, batch_bytes=prm["batch_bytes"])
        raw_seconds = common.raw_seconds_for(size) if raw_seconds is None else raw_seconds
        if len(g.paths) == 1 and raw_seconds > 0:
            r.update(common.raw_rates(g.paths[0], raw_seconds))
            if "raw_read_Bps" in r and "raw_write_Bps" in r:
                # time the raw device needs for these bytes, reads and writes at their own best rates
                raw_s = r["bytes_read"] / r["raw_read_Bps"] + r["bytes_written"] / r["raw_write_Bps"]
                r["of_raw"] = raw_s / r["gpuio_s"]
        return r


def main(argv=None) -> int:
    ap = common.parser("vecadd", __doc__, SIZES)
    a = ap.parse_args(argv)
    r = run(a.size, a.store, a.device, a.cold, a.workers, a.keep)
    common.print_row(r)
    if "of_raw" in r:
        print(f"vecadd rate / raw device read+write rate = {r['of_raw']:.2f} (target >= 0.9)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
