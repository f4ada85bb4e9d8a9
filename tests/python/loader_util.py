"""What the loader tests share (loader/, pyg/): the order in which a loader announces and submits its batches to a
feature store, recorded and expected."""
from __future__ import annotations

import torch

from gpuio.loader import ramped_lookahead


def log_calls(store):
    """Record the store's announce/submit calls in order: ("a"|"s", rows)."""
    log = []
    announce, submit = store.announce, store.submit

    def a(idx):
        log.append(("a", torch.as_tensor(idx).clone()))
        return announce(idx)

    def s(idx, force=False):
        log.append(("s", torch.as_tensor(idx).clone()))
        return submit(idx, force)
    store.announce, store.submit = a, s
    return log


def expected_order(n: int, window: int) -> str:
    """The announce ("a") / submit ("s") order of n batches under the ramp: batch i's announcement, then the
    submissions that leave ramped_lookahead(i, window) batches announced ahead, then the rest at the end."""
    want, ahead = "", 0
    for i in range(n):
        want, ahead = want + "a", ahead + 1
        while ahead > ramped_lookahead(i, window):
            want, ahead = want + "s", ahead - 1
    return want + "s" * ahead
