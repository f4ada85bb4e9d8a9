"""CAM Fig. 7 through gpuio's stream-ordered Python API (the twin of examples/cam_pipeline.cu).

    loop:  read_async(next chunk)  ->  wait(current chunk)  ->  compute on the current chunk

over a file much larger than its two chunk buffers, so storage reads overlap the compute. The same loop
also runs with I/O only and with compute only; the pipeline should take about max(I/O, compute), not the
sum. Compute per 4-byte word: `rounds` steps of an integer hash, `reps` times per chunk; per-chunk sums
are checked against a CPU reference computed from plain file reads.

  python examples/cam_pipeline.py --file data.bin --limit-gib 2 --cold   # GPU (device=cuda when usable)
  python examples/cam_pipeline.py --device cpu --create-mib 4 --chunk-kib 64   # host path, tiny

On the GPU the reads run on their own stream: the read into a buffer waits (stream-ordered, no host
sync) for the compute that last used it, and the compute stream waits for the read's event.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import numpy as np

import gpuio

BS = 4096
MASK = 0xFFFFFFFF


def chunk_sum(words, rounds: int, reps: int):
    """Sum over words (int64 values < 2**32; NumPy array or torch tensor) of `rounds` hash steps, reps times;
    the result is mod 2**32 (a 0-d array/tensor, left on its device)."""
    total = None
    for _ in range(reps):
        x, acc = words, None
        for r in range(rounds):
            x = (x * 1664525 + 1013904223) & MASK  # < 2**53 before the mask: exact in int64
            acc = (x >> (r & 7)) if acc is None else acc + (x >> (r & 7))
        s = acc.sum() & MASK
        total = s if total is None else (total + s) & MASK
    return total


def as_words(buf, xp_torch: bool):
    if xp_torch:
        import torch

        return buf.view(torch.int32).to(torch.int64) & MASK
    return np.frombuffer(buf, dtype=np.uint32).astype(np.int64)


def drop_caches(cold: bool) -> None:
    if cold and os.geteuid() == 0:
        subprocess.run(["sync"], check=False)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")


class Pipeline:
    def __init__(self, eng, device: str, chunk_blocks: int, chunks: int, rounds: int):
        self.eng, self.device, self.cb, self.chunks, self.rounds = eng, device, chunk_blocks, chunks, rounds
        self.gpu = device == "cuda"
        if self.gpu:
            import torch

            self.torch = torch
            self.bufs = [gpuio.empty((chunk_blocks, BS), device="cuda") for _ in range(2)]
            self.ids = torch.arange(chunks * chunk_blocks, dtype=torch.int64, device="cuda").view(chunks, -1)
            self.io_stream, self.compute_stream = torch.cuda.Stream(), torch.cuda.Stream()
            self.freed = [torch.cuda.Event() for _ in range(2)]
            self.sums = torch.zeros(chunks, dtype=torch.int64, device="cuda")
        else:
            self.bufs = [gpuio.aligned_empty(chunk_blocks * BS) for _ in range(2)]
            self.ids = np.arange(chunks * chunk_blocks, dtype=np.int64).reshape(chunks, -1)
            self.sums = np.zeros(chunks, dtype=np.int64)

    def _read(self, c: int):
        b = c % 2
        if not self.gpu:
            return self.eng.read_async(self.ids[c], self.bufs[b])
        with self.torch.cuda.stream(self.io_stream):
            self.io_stream.wait_event(self.freed[b])  # the compute that last used this buffer is done
            return self.eng.read_async(self.ids[c], self.bufs[b])

    def _compute(self, c: int, handle, reps: int):
        b = c % 2
        if not self.gpu:
            self.sums[c] = chunk_sum(as_words(self.bufs[b], False), self.rounds, reps)
            return
        with self.torch.cuda.stream(self.compute_stream):
            if handle is not None:
                self.compute_stream.wait_event(handle.event)
            self.sums[c] = chunk_sum(as_words(self.bufs[b], True), self.rounds, reps)
            self.freed[b].record(self.compute_stream)

    def _sync(self):
        if self.gpu:
            self.torch.cuda.synchronize()

    def run(self, mode: str, reps: int) -> float:
        """mode: pipeline | io | compute. Returns seconds."""
        self._sync()
        t0 = time.perf_counter()
        if mode == "compute":
            for c in range(self.chunks):
                self._compute(c, None, reps)
        else:
            h = self._read(0)
            for c in range(self.chunks):
                nxt = self._read(c + 1) if c + 1 < self.chunks else None
                h.wait()  # current chunk is in its buffer (bounded wait: raises instead of hanging)
                if mode == "pipeline":
                    self._compute(c, h, reps)
                elif self.gpu:  # I/O only: the buffer is free again at once
                    self.freed[c % 2].record(self.io_stream)
                h = nxt
        self._sync()
        return time.perf_counter() - t0

    def results(self) -> np.ndarray:
        return (self.sums.cpu().numpy() if self.gpu else self.sums).copy()


def reference(path: str, chunk_bytes: int, picks, rounds: int, reps: int) -> dict:
    out = {}
    with open(path, "rb") as f:
        for c in picks:
            f.seek(c * chunk_bytes)
            data = f.read(chunk_bytes)
            out[c] = int(chunk_sum(np.frombuffer(data, np.uint32).astype(np.int64), rounds, reps))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--file", default=None, help="data file (default: create one, see --create-mib)")
    ap.add_argument("--create-mib", type=int, default=64, help="size of the file created when --file is absent")
    ap.add_argument("--limit-gib", type=float, default=2.0, help="use at most this much of the file")
    ap.add_argument("--chunk-kib", type=int, default=8192)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--reps", type=int, default=0, help="compute repetitions per chunk (0: match the I/O time)")
    ap.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    ap.add_argument("--cold", action="store_true", help="drop the page cache before each pass (root)")
    ap.add_argument("--check", type=int, default=48, help="chunks checked against the CPU reference")
    a = ap.parse_args(argv)
    device = a.device
    if device == "auto":
        device = "cuda" if gpuio.gpu.probe().get("count", 0) > 0 else "cpu"
    if device == "cuda":
        import torch  # noqa: F401

    path = a.file
    if path is None:
        path = os.path.abspath("cam_pipeline.bin")
        if not os.path.exists(path) or os.path.getsize(path) < a.create_mib << 20:
            rng = np.random.default_rng(7)
            with open(path, "wb") as f:
                f.write(rng.integers(0, 256, a.create_mib << 20, dtype=np.uint8).tobytes())
    if a.chunk_kib * 1024 % BS:
        raise SystemExit(f"--chunk-kib={a.chunk_kib} must be a multiple of {BS // 1024}")
    chunk_blocks = a.chunk_kib * 1024 // BS
    chunk_bytes = chunk_blocks * BS
    usable = min(os.path.getsize(path), int(a.limit_gib * 2**30))
    chunks = usable // chunk_bytes
    if chunks < 4:
        raise SystemExit(f"file {path} holds {chunks} chunks of {a.chunk_kib} KiB; the example needs >= 4 "
                         "(a file larger than its two buffers)")
    print(f"device {device}, file {path}: {chunks} chunks of {a.chunk_kib} KiB, 2 buffers "
          f"({2 * chunk_bytes / 2**20:.1f} MiB) for {chunks * chunk_bytes / 2**30:.2f} GiB", flush=True)
    slot = min(1 << 20, chunk_bytes)  # device reads up to 1 MiB each through staging (GPU buffers)
    staging = max(32 << 20, 4 * chunk_bytes) // slot * slot
    with gpuio.Engine(path, workers=2, staging_bytes=staging, staging_slot_bytes=slot) as eng:
        p = Pipeline(eng, device, chunk_blocks, chunks, a.rounds)
        p.run("io", 1)  # warm-up: GPU layer attach, first requests, kernels loaded
        drop_caches(a.cold)
        io_s = p.run("io", 1)
        reps = a.reps
        if reps <= 0:  # one rep's cost on a resident chunk, scaled to the I/O time per chunk
            p.run("compute", 1)
            one = p.run("compute", 1)
            reps = max(1, round(io_s / one))
        comp_s = p.run("compute", reps)
        drop_caches(a.cold)
        pipe_s = p.run("pipeline", reps)
        sums = p.results()
        stats = eng.stats()
    picks = sorted(set(np.linspace(0, chunks - 1, min(chunks, a.check)).astype(int).tolist()))
    ref = reference(path, chunk_bytes, picks, a.rounds, reps)
    bad = [c for c in picks if int(sums[c]) != ref[c]]
    for c in bad[:3]:
        print(f"MISMATCH chunk {c}: {device} {int(sums[c])} cpu {ref[c]}")
    ratio = pipe_s / max(io_s, comp_s)
    print(f"data_path={stats.get('data_path')} io_alone_s={io_s:.3f} compute_alone_s={comp_s:.3f} "
          f"pipeline_s={pipe_s:.3f} ratio_to_max={ratio:.3f} reps={reps} rounds={a.rounds} "
          f"checked={len(picks)} chunks")
    print("PASS cam_pipeline.py" if not bad else f"FAIL cam_pipeline.py ({len(bad)} chunk sums differ)")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
