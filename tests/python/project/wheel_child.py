"""Run by test_wheel.py with the fresh venv's interpreter, in an empty folder, where the Ceph libraries may be
hidden: checks gpuio as an installed wheel sees it and prints one line per check ("ok <what>").

    python wheel_child.py SITE_PACKAGES CEPH_HIDDEN(0|1)
"""
import os
import sys

site, ceph_hidden = sys.argv[1], sys.argv[2] == "1"

import gpuio  # noqa: E402
from gpuio import _core  # noqa: E402

for mod in (gpuio, _core):
    assert os.path.realpath(mod.__file__).startswith(os.path.realpath(site)), f"{mod.__name__} from {mod.__file__}"
print("ok imported from the wheel:", os.path.dirname(_core.__file__))

assert _core.rbd_built, "the wheel was built without the rbd backend"
reason = _core.rbd_unavailable()
if ceph_hidden:
    import ctypes

    try:
        ctypes.CDLL("librbd.so.1")
        raise AssertionError("librbd.so.1 still loads: the Ceph libraries were not hidden")
    except OSError:
        pass
    assert reason.startswith("volumes are unavailable: lib"), reason
    assert "cannot open shared object file" in reason and "install librbd1" in reason, reason
    try:
        gpuio.Engine("rbd:rbd/volume", backend="rbd")
        raise AssertionError("an rbd engine opened without librbd")
    except RuntimeError as e:
        assert str(e) == reason, e
    from gpuio import volumes

    try:
        volumes.Identity().client()
        raise AssertionError("a Ceph client connected without librados")
    except RuntimeError as e:
        assert str(e) == reason, e
    print("ok volumes unavailable:", reason)
else:
    assert reason == "", reason
    print("ok volumes available")

from gpuio_apps.data import find_dataset, load_planetoid  # noqa: E402

folder = find_dataset("cora")
assert os.path.realpath(folder).startswith(os.path.realpath(site)), folder
assert load_planetoid(folder, "cora").num_nodes == 2708
print("ok datasets from the wheel:", folder)
