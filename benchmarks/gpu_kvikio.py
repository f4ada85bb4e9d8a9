"""KvikIO peer (own process): the same 4 KiB reads into GPU memory through kvikio.CuFile.pread, one
future per block, in compatibility mode (no nvidia-fs on the GPU machine). Prints one JSON line."""
import json
import os
import sys
import time

import numpy as np


def main():
    path, ids_file, nthreads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.environ.setdefault("KVIKIO_COMPAT_MODE", "ON")
    os.environ["KVIKIO_NTHREADS"] = str(nthreads)
    import cupy
    import kvikio
    import kvikio.defaults

    ids = np.load(ids_file)
    bs = 4096
    out = cupy.empty((len(ids), bs), dtype=cupy.uint8)
    res = {"nthreads": kvikio.defaults.get("num_threads") if hasattr(kvikio.defaults, "get") else nthreads,
           "compat_mode": str(kvikio.defaults.compat_mode() if hasattr(kvikio.defaults, "compat_mode") else "?")}
    with kvikio.CuFile(path, "r") as f:
        f.pread(out[0], bs, 0).get()  # warm-up (thread pool, context)
        t0 = time.perf_counter()
        window = 4096
        for s in range(0, len(ids), window):
            futs = [f.pread(out[i], bs, int(ids[i]) * bs) for i in range(s, min(s + window, len(ids)))]
            for fu in futs:
                fu.get()
        dt = time.perf_counter() - t0
    cupy.cuda.runtime.deviceSynchronize()
    res.update(iops=len(ids) / dt, seconds=dt, reads=len(ids))
    print(json.dumps(res))


if __name__ == "__main__":
    main()
