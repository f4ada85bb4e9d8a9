"""gpuio volumes: Ceph RBD images as gpuio devices, with cephx access control and a single-writer lease.

    from gpuio import volumes
    volumes.create("rbd/feat", 1 << 30)                       # an RBD image (pool rbd)
    with volumes.open("rbd/feat", "r+") as eng: ...           # a gpuio.Engine on it (backend "rbd")
    volumes.map("rbd/feat", 1234)                             # object, PG, acting OSDs of block 1234
    volumes.grant("rbd/team-a/feat", "gpu1", "r")             # cephx user with read-only caps on rbd/team-a
    tf = volumes.create_tensor("rbd/x", (n, 128), "float32")  # a TensorFile on a volume

Placement, replication and recovery are Ceph's (CRUSH, pool size); api.py documents how blocks map to
objects. `cluster` starts a throwaway one-node cluster (`gpuio cluster up`).
"""
from .access import grant, revoke, users
from .api import (DEFAULTS, Identity, ShrinkRefused, break_lock, check_resize, conf_file, create, delete, info, list, lock_owners, map, open,
                  parts, resize, spec)
from .tensors import create_tensor, open_tensor

__all__ = ["DEFAULTS", "Identity", "ShrinkRefused", "break_lock", "check_resize", "conf_file", "create", "create_tensor",
           "delete", "grant", "info", "list", "lock_owners", "map", "open", "open_tensor", "parts", "resize", "revoke", "spec",
           "users"]
