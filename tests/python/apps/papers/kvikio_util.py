"""Shared by the KvikIO store tests (test_apps_kvikio.py on the CPU with a stand-in kvikio, test_gpu_kvikio.py
with the real one): the engine's store, the pread baseline and the KvikIO store over the same files, with two
1 MiB extents x and y allocated by the engine and known to the other two."""
import contextlib

from gpuio_apps.papers import kvikio_store
from gpuio_apps.papers.store import PosixStore, Store, same_layout


@contextlib.contextmanager
def three_stores(paths, capacity_bytes=2 << 20):
    with Store(paths, capacity_bytes) as g, PosixStore(paths, capacity_bytes) as p, \
            kvikio_store.KvikioStore(paths, capacity_bytes) as k:
        e = [g.alloc(n, 1 << 20) for n in "xy"]
        for s in (p, k):
            same_layout(g, s, "xy")
        yield g, p, k, e
