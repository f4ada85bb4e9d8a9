"""Out-of-core GEMM (CAM, GNStor Fig. 16): C = A @ B with A, B and C on storage, tile by tile.

A (M x K) and B (K x N) are stored as T x T tiles (row-major inside a tile): A's tiles row by row, so
the K/T tiles of one block row of A are contiguous; B's tiles column by column, so one block column of
B is contiguous. Step (i, j) reads B's block column j, and A's block row i when j == 0 (sequential reads),
computes C(i, j) = sum_k A(i, k) @ B(k, j) with one torch.matmul (fp32 accumulation for bf16 inside matmul),
and writes C(i, j) back. A's block row stays in device memory for the row's other steps, as an out-of-core
GEMM keeps its panel: reading it again for every j made gpuio (O_DIRECT) read it nt times from the disk
while the pread baseline got nt - 1 of those reads from the page cache (0.65x on the H200; docs/decisions/0006).
Steps run double-buffered (gpuio_apps.papers.pipeline): the next step's tiles stream in
while torch.matmul runs. Baselines: the same steps over pread + copy (gpuio_apps.papers.store.PosixStore), and over
KvikIO's CuFile pread/pwrite into the tiles (gpuio_apps.papers.kvikio_store, compat mode) where kvikio can run; where it
cannot, one line says why and the row carries kvikio_skipped.

Tiles are generated from a seed per tile, so the check recomputes any C tile's rows in float64 without
holding A or B: sampled rows of sampled tiles, within a tolerance scaled by sqrt(K) and the dtype.

    python -m gpuio_apps.papers.gemm --size small --dtype bf16 --device cuda --cold
"""
from __future__ import annotations

import functools
import math
import sys

import torch

from . import common
from .kvikio_store import KvikioStore
from .pipeline import Step, measure_steps, resolve_device

SIZES = {  # n: M = K = N; tile: T
    "tiny": dict(n=256, tile=128),
    "small": dict(n=2048, tile=512),
    "medium": dict(n=8192, tile=2048),
    "large": dict(n=16384, tile=4096),   # GNStor's 16384^2
}
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
TOLERANCE = {"bf16": 0.03, "fp32": 1e-4}  # x sqrt(K): bf16 output rounding dominates; fp32 accumulation order
CHECK_TILES = 3
CHECK_ROWS = 16


def tile(name: str, i: int, k: int, t: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """Tile (i, k) of matrix `name` ("A" or "B"): deterministic from (seed, name, i, k)."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + (ord(name) * 7919 + i) * 104_729 + k)
    return torch.randn((t, t), generator=g).to(dtype)


class Gemm:
    def __init__(self, n: int, tile_rows: int, dtype: str = "bf16", seed: int = 0):
        if dtype not in DTYPES:
            raise ValueError(f"dtype={dtype!r} is not one of {', '.join(DTYPES)}")
        if tile_rows <= 0 or n % tile_rows:
            raise ValueError(f"tile={tile_rows} must divide n={n}")
        self.n, self.t, self.dtype_name, self.dtype, self.seed = n, tile_rows, dtype, DTYPES[dtype], seed
        self.nt = n // tile_rows
        self.tile_bytes = tile_rows * tile_rows * self.dtype.itemsize
        if self.tile_bytes % 4096:
            raise ValueError(f"a {tile_rows}x{tile_rows} {dtype} tile is {self.tile_bytes} bytes, "
                             "not whole 4 KiB blocks")

    @property
    def matrix_bytes(self) -> int:
        return self.nt * self.nt * self.tile_bytes

    def alloc(self, g, p) -> None:
        self.ext = {m: common.alloc_both(g, p, m, self.matrix_bytes) for m in "ABC"}

    def a_offset(self, i: int, k: int) -> int:   # A: tiles row by row
        return (i * self.nt + k) * self.tile_bytes

    def b_offset(self, k: int, j: int) -> int:   # B: tiles column by column
        return (j * self.nt + k) * self.tile_bytes

    def c_offset(self, i: int, j: int) -> int:
        return (i * self.nt + j) * self.tile_bytes

    def prepare(self, store) -> None:
        """Write A and B (untimed)."""
        for i in range(self.nt):
            for k in range(self.nt):
                store.write(self.ext["A"], self.a_offset(i, k), tile("A", i, k, self.t, self.dtype, self.seed))
                store.write(self.ext["B"], self.b_offset(k, i), tile("B", k, i, self.t, self.dtype, self.seed))

    def _compute(self, bufs: list[torch.Tensor], fresh_a: bool) -> list[torch.Tensor]:
        """fresh_a: bufs = [A's block row, B's block column], else [B's block column] with the row kept from
        the row's first step (steps run in order in every mode)."""
        t, kt = self.t, self.nt
        if fresh_a:
            # (t, kt * t): the permute makes reshape copy, so the panel does not alias the pipeline's slot
            self._panel = bufs[0].view(self.dtype).view(kt, t, t).permute(1, 0, 2).reshape(t, kt * t)
        elif getattr(self, "_panel", None) is None:
            raise RuntimeError("GEMM step without its block row of A: steps must run in order from j == 0")
        b = bufs[-1].view(self.dtype).view(kt * t, t)  # block column of B
        return [torch.matmul(self._panel, b)]

    def steps(self, store) -> list[Step]:
        row_bytes = self.nt * self.tile_bytes
        self._panel = None
        return [Step(reads=([(self.ext["A"], self.a_offset(i, 0), row_bytes)] if j == 0 else [])
                     + [(self.ext["B"], self.b_offset(0, j), row_bytes)],
                     compute=functools.partial(self._compute, fresh_a=j == 0),
                     writes=[(self.ext["C"], self.c_offset(i, j))], out_nbytes=[self.tile_bytes])
                for i in range(self.nt) for j in range(self.nt)]

    def verify(self, store) -> str:
        """Sampled rows of sampled C tiles against float64 products of the regenerated tiles."""
        g = torch.Generator().manual_seed(self.seed + 17)
        picks = {(0, 0), (self.nt - 1, self.nt - 1)}
        while len(picks) < min(CHECK_TILES, self.nt * self.nt):
            picks.add(tuple(int(x) for x in torch.randint(0, self.nt, (2,), generator=g)))
        tol = TOLERANCE[self.dtype_name] * math.sqrt(self.n)
        worst = 0.0
        out = torch.empty(self.tile_bytes, dtype=torch.uint8)
        for i, j in sorted(picks):
            store.read(self.ext["C"], self.c_offset(i, j), out)
            c = out.view(self.dtype).view(self.t, self.t).double()
            rows = torch.randperm(self.t, generator=g)[:CHECK_ROWS]
            ref = torch.zeros(rows.numel(), self.t, dtype=torch.float64)
            for k in range(self.nt):
                a = tile("A", i, k, self.t, self.dtype, self.seed)[rows].double()
                ref += a @ tile("B", k, j, self.t, self.dtype, self.seed).double()
            worst = max(worst, float((c[rows] - ref).abs().max()))
        if not worst <= tol:
            raise AssertionError(f"GEMM {self.dtype_name} n={self.n}: C differs from the float64 reference by "
                                 f"{worst:.4g} > tolerance {tol:.4g}")
        return f"ok ({len(picks)} tiles x {CHECK_ROWS} rows, max err {worst:.2g} <= {tol:.2g})"


def run(size: str = "tiny", store=None, device: str = "auto", cold: bool = False, dtype: str = "bf16",
        workers: int | None = None, keep: bool = False, **overrides) -> dict:
    prm = common.size_params(SIZES, size)
    prm.update(overrides)
    dev = resolve_device(device)
    store = store or common.default_store("gemm")
    app = Gemm(prm["n"], prm["tile"], dtype)
    with common.opened_pair(store, 3 * app.matrix_bytes, workers, device=dev, keep=keep) as (g, p):
        app.alloc(g, p)
        app.prepare(g)
        with common.extra_baseline(KvikioStore, g, "ABC", f"gemm-{dtype}") as (others, skipped):
            return measure_steps(f"gemm-{dtype}", size, g, p, app.steps, app.verify, dev, cold, "pread+copy",
                                 others=others, on=dev.type, n=app.n, tile=app.t, flops=2 * app.n ** 3, **skipped)


def main(argv=None) -> int:
    ap = common.parser("gemm", __doc__, SIZES)
    ap.add_argument("--dtype", default="bf16", choices=list(DTYPES))
    a = ap.parse_args(argv)
    common.print_row(run(a.size, a.store, a.device, a.cold, a.dtype, a.workers, a.keep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
