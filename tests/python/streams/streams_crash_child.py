"""Child side of the kill -9 campaign (test_streams_crash.py): random stream operations on a store until
a seeded timer SIGKILLs the process, or (kill_in_close=k) until it SIGKILLs itself inside its k-th stream
creation, after the stream's objects are written and before it is closed. Every operation is logged before it
starts (B) and after it returns (E) with O_APPEND single-line writes, so the parent knows exactly which operation
was cut."""
from __future__ import annotations

import errno
import os
import signal
import threading

import numpy as np

from streams_util import contents, open_small


def run(path: str, log_path: str, seed: int, kill_after_s: float, kill_in_close: int = 0) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def say(line: str) -> None:
        os.write(log, (line + "\n").encode())

    rng = np.random.default_rng(seed)
    st = open_small(path, backend=os.environ.get("GPUIO_CRASH_BACKEND", "uring"))
    # The clock starts once the store is mounted, so that the kills land among the stream operations.
    if not kill_in_close:
        threading.Timer(kill_after_s, os.kill, (os.getpid(), signal.SIGKILL)).start()
    n = 0
    while True:
        live = st.streams()
        op = rng.random()
        if live and op < 0.3:
            sid = int(rng.choice(live))
            say(f"B destroy {sid}")
            st.destroy_stream(sid)
            say(f"E destroy {sid}")
        elif live and op < 0.4:
            sid = int(rng.choice(live))
            say(f"B consume {sid}")
            sd = st.read_and_destroy_stream(sid)
            for _ in range(int(rng.integers(0, 4))):
                st.read_stream(sd)
            st.close_stream(sd)
            say(f"E consume {sid}")
        elif live and op < 0.5:
            sid = int(rng.choice(live))
            sd = st.open_stream(sid)
            while st.read_stream(sd) is not None:
                pass
            st.close_stream(sd)
        else:
            content_seed = seed * 1000 + n
            n += 1
            sd = st.create_stream()
            say(f"B close {sd.stream_id} {content_seed}")
            try:
                st.write_stream(sd, content_seed)
                for obj in contents(content_seed, sd.stream_id):
                    st.write_stream(sd, obj)
                if kill_in_close and n >= kill_in_close:  # the k-th creation, or the next after a full store
                    os.kill(os.getpid(), signal.SIGKILL)
                st.close_stream(sd)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                say(f"E full {sd.stream_id}")
                if not sd.closed:
                    st.close_stream(sd)   # what it holds is complete records: close is still valid
                    say(f"E close {sd.stream_id} partial")
                continue
            say(f"E close {sd.stream_id} {content_seed}")
