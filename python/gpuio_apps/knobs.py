"""gpuio_apps' own knob table: the applications' knobs, kept apart from the library's (gpuio.defaults holds only the
library's). Rows are gpuio.defaults.Knob, so `listing()` gives the same rows as gpuio.defaults.listing() and
`gpuio defaults` can print both tables. None of these is a process-wide setting (no environment variable): each
is a keyword of its owner, which takes its default from here.

    from gpuio_apps import knobs
    knobs.defaults_of("cluster")      # {keyword: default}: gpuio_apps.cluster.up's signature
"""
from __future__ import annotations

from gpuio.defaults import Knob

# owner -> what takes its knobs (the listing's headings)
OWNERS = {
    "cluster": "gpuio_apps.cluster.up(...) keywords (`gpuio cluster up`)",
}

_MiB = 1 << 20
_ROWS: list[tuple[str, str, object, str]] = [
    ("cluster", "osds", 3, "OSD daemons (BlueStore on sparse files)"),
    ("cluster", "osds_max", 16, "most OSD daemons `gpuio cluster up` starts: a one-node throwaway cluster, each OSD a "
     "daemon (~30 threads, up to osd_memory_bytes of RAM); more only loads the node, it adds no disks"),
    ("cluster", "size", 2, "replicas of the rbd pool"),
    ("cluster", "pool", "rbd", "the pool volumes go to"),
    ("cluster", "pgs", 32, "placement groups of that pool"),
    ("cluster", "osd_bytes", 10 << 30, "sparse block file per OSD (only written blocks use disk)"),
    ("cluster", "osd_memory_bytes", 896 * _MiB, "osd_memory_target of each OSD"),
    ("cluster", "timeout_s", 180, "bring-up must reach active+clean within this"),
    ("cluster", "mgr", True, "start a mgr (PG states, `ceph status`); RBD I/O works without one"),
]


def _type_of(v: object) -> str:
    return "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "float" if isinstance(v, float) \
        else "str"


_KNOBS = {f"{o}.{k}": Knob(f"{o}.{k}", o, k, d, _type_of(d), doc, source="Python") for o, k, d, doc in _ROWS}


def knobs(owner: str | None = None) -> list[Knob]:
    """The table's rows (of one owner), in the table's order."""
    if owner is not None and owner not in OWNERS:
        raise ValueError(f"unknown owner {owner!r}; known: {', '.join(OWNERS)}")
    return [k for k in _KNOBS.values() if owner is None or k.owner == owner]


def defaults_of(owner: str) -> dict:
    """{keyword: default} of one owner's knobs."""
    return {k.key: k.default for k in knobs(owner)}


def listing(owner: str | None = None) -> list[dict]:
    """The table as gpuio.defaults.listing's rows (a keyword's value in force is its default)."""
    return [dict(name=k.name, owner=k.owner, value=k.default, source="default", default=k.default, type=k.type,
                 range=k.range_text(), env=None, per_target=False, owned_by="gpuio_apps", doc=k.doc)
            for k in knobs(owner)]


__all__ = ["OWNERS", "defaults_of", "knobs", "listing"]
