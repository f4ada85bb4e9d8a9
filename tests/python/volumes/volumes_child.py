"""A writer in its own process, for the lease and fencing tests (test_volumes_lease.py).

    python volumes_child.py CONF VOLUME MODE     MODE: hold | stop
hold: open the volume read-write (taking its lock), write block 0 with 0xAA, print "ready", sleep.
stop: the same, then SIGSTOP itself; once continued, write block 1 with 0xAA and print "late-write ok" or
"late-write refused <errno>", then exit 0.
"""
import os
import signal
import sys
import time

import numpy as np

from gpuio import volumes

conf, volume, mode = sys.argv[1:4]
who = volumes.Identity(conf=conf, timeout_s=10)
eng = volumes.open(volume, "r+", who=who, workers=1, io_timeout_ms=20000, rbd=dict(op_timeout_s=10))
eng.write([0], np.full(4096, 0xAA, np.uint8))
print("ready", flush=True)
if mode == "hold":
    time.sleep(300)
    sys.exit(0)
os.kill(os.getpid(), signal.SIGSTOP)
try:
    eng.write([1], np.full(4096, 0xAA, np.uint8))
    print("late-write ok", flush=True)
except OSError as e:
    print(f"late-write refused {e.errno} {e}", flush=True)
os._exit(0)  # the engine's close may block on a fenced client; the test only needs the answer
