"""I/O errors from the fault backend: every failed call raises OSError, and after a restart on a healthy
device check() passes and every stream whose close returned reads back intact."""
from __future__ import annotations

import pytest

from streams_util import contents, open_small, read_all, same


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_eio_never_corrupts(tmp_path, seed):
    path = tmp_path / "s.bin"
    open_small(path).close()  # format on a healthy device
    closed, failures = {}, 0
    for round_ in range(3):
        try:
            st = open_small(path, backend="fault:uring",
                            fault=dict(seed=seed * 100 + round_, eio_rate=0.03, short_rate=0.05))
        except OSError:
            failures += 1
            continue
        with st:
            for i in range(15):
                try:
                    sd = st.create_stream()
                    st.write_stream(sd, 1000 * round_ + i)
                    for obj in contents(1000 * round_ + i, sd.stream_id):
                        st.write_stream(sd, obj)
                    st.close_stream(sd)
                    closed[sd.stream_id] = 1000 * round_ + i
                    if i % 4 == 3:
                        victim = min(closed)
                        st.destroy_stream(victim)
                        closed.pop(victim)
                except OSError as e:
                    failures += 1
                    assert e.errno, f"seed {seed}: OSError without errno: {e}"
    with open_small(path) as st:
        st.check()
        assert set(closed) <= set(st.streams()) and len(st.streams()) - len(closed) <= failures
        for sid, cseed in closed.items():
            objs = read_all(st, sid)
            assert objs[0] == cseed and all(same(a, b) for a, b in zip(contents(cseed, sid), objs[1:]))
    assert failures > 0, f"seed {seed}: the fault backend injected nothing; raise eio_rate"
