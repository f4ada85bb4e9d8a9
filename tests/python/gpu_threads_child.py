"""Child process of test_gpu_threads.py: a background thread reads through gpuio into GPU memory
while the main thread launches CUDA work of its own, which is what every training loop with a background
loader does. At 1cf507e this combination deadlocked `gpuio demo` on the H200.

A fresh process per case, so the CUDA context starts with no kernels loaded: the main thread's first
launches (cuBLAS, new PyTorch kernels) then load modules lazily while the loader's reads are in flight.

    python gpu_threads_child.py --wait kernel --path store --seconds 6 --main all

--path store: gpuio.TableCache over a TensorFile (host row ids, the loader's path);
--path stream: Engine.read with block ids already on the GPU (the stream-ordered path, GPU-resident ids).
--path event: one-block Engine.read_async with host ids, consumed on another stream through handle.event.
--main lazy|free|sync|all: what the main thread does (first launches of new kernels / torch.cuda.empty_cache,
whose cudaFree synchronises the device / torch.cuda.synchronize / all three).
Prints one line "ok reads=N main_iters=M checked=K" and exits 0, or exits 1 naming the wrong value.
"""
import argparse
import faulthandler
import os
import sys
import tempfile
import threading
import time

import numpy as np
import torch

import gpuio

ROWS, COLS = 16384, 128  # 8 MiB of float32: row r holds r * COLS + column


def main_thread_work(kind: str, it: int) -> None:
    dev = "cuda"
    if kind in ("lazy", "all"):  # kernels this process has not launched yet: lazy module loads
        a = torch.randn(256 + it, 256, device=dev)
        b = a @ a.T                                   # cuBLAS (first use creates its handle and loads kernels)
        c = torch.nn.functional.conv1d(a[None], torch.randn(4, 256 + it, 3, device=dev))  # cuDNN
        d = torch.sort(b.flatten()).values + torch.fft.rfft(a).abs().sum() + c.sum()
        torch.cumsum(d, 0)
    if kind in ("free", "all"):
        x = [torch.empty(1 << 20, device=dev) for _ in range(8)]
        del x
        torch.cuda.empty_cache()                      # cudaFree: synchronises the whole device
    if kind in ("sync", "all"):
        torch.cuda.synchronize()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--wait", default="auto", choices=["auto", "kernel", "wait_value"])
    p.add_argument("--path", default="store", choices=["store", "stream", "event"])
    p.add_argument("--stream-copy", default="engine", choices=["engine", "kernel"])
    p.add_argument("--main", default="all", choices=["lazy", "free", "sync", "all", "none"])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--timeout", type=float, default=60.0, help="faulthandler dump and exit after this")
    a = p.parse_args()
    faulthandler.dump_traceback_later(a.timeout, exit=True)
    tmp = tempfile.mkdtemp(prefix="gpuio-threads-")
    path = os.path.join(tmp, "table.npy")
    ref = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    tf = gpuio.TensorFile.create(path, (ROWS, COLS), "float32", workers=2)
    tf.scatter(np.arange(ROWS), ref)
    tf.engine.attach_gpu(stream_wait=a.wait, stream_copy=a.stream_copy)
    if a.path == "store":
        fs = gpuio.TableCache(tf, gpu_cache_bytes=1 << 20, device="cuda", accumulate=False)

        def read(ids):
            return fs.gather(torch.from_numpy(ids)), ref[ids]
    else:
        base = tf.engine_block_base
        blocks_per_row = tf.block_size // (COLS * 4)  # 8 rows per 4 KiB block

        def read(ids):
            blocks = np.unique(ids // blocks_per_row)
            out = torch.empty((blocks.size, tf.block_size // 4), dtype=torch.float32, device="cuda")
            if a.path == "stream":
                tf.engine.read(torch.from_numpy(blocks + base).cuda(), out)
                torch.cuda.current_stream().synchronize()
                return out, ref.reshape(-1, tf.block_size // 4)[blocks]
            # event: one block, host ids (the latency path); another stream consumes it through handle.event
            # (made on demand from the C++ completion event) while this thread polls wait() GIL-free
            one = out[:1]
            h = tf.engine.read_async(blocks[:1] + base, one)
            side = torch.cuda.Stream()
            side.wait_event(h.event)
            with torch.cuda.stream(side):
                got = one.clone()
            assert h.wait() is one and h.done()
            side.synchronize()
            return got, ref.reshape(-1, tf.block_size // 4)[blocks[:1]]

    errors, counts, started, stop = [], dict(reads=0, main=0), threading.Event(), threading.Event()

    def loader():
        rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
        try:
            while not stop.is_set():
                ids = rng.integers(0, ROWS, 512)
                got, want = read(ids)
                if not np.array_equal(got.cpu().numpy(), want):
                    errors.append(f"read {counts['reads']}: rows differ from the reference")
                    return
                counts["reads"] += 1
                started.set()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(f"loader thread: {type(e).__name__}: {e}")
            started.set()

    if a.main != "none":
        torch.cuda.init()  # the context exists before the loader; the main thread's kernels are still unloaded
    th = threading.Thread(target=loader, daemon=True)
    th.start()
    started.wait(a.timeout)
    t_end = time.monotonic() + a.seconds
    while time.monotonic() < t_end and not errors:
        if a.main != "none":
            main_thread_work(a.main, counts["main"])
        counts["main"] += 1
        time.sleep(0.001)
    stop.set()
    th.join(a.timeout)
    torch.cuda.synchronize()
    s = tf.engine.stats()
    tf.close()
    if errors:
        print("FAIL", errors[0], flush=True)
        return 1
    if th.is_alive():
        print("FAIL loader thread did not stop", flush=True)
        return 1
    print(f"ok reads={counts['reads']} main_iters={counts['main']} wait={s.get('stream_wait', '-')} "
          f"data_path={s.get('data_path', '-')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
