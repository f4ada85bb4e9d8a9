"""Diagnosis on the GPU machine (`bash scripts/gpu.sh threads`): run gpu_threads_child.py (tests/python) over a
matrix of wait modes, read paths, main-thread work and environments (CUDA_MODULE_LOADING=EAGER/LAZY), one fresh
process each, bounded; print one table (finished or hung, reads done) and write each failed case's output under $OUT.
Not a test module (pytest collects test_*.py only): test_gpu_threads.py runs the judged cases.
    python3 tests/python/gpu/gpu_threads_matrix.py [--timeout 20] CASE...   CASE = wait/path/main[/ENV=V]"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # test_gpu_threads beside this file, the shared helpers (gpu_util) above
from test_gpu_threads import run_child  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("cases", nargs="+")
p.add_argument("--timeout", type=float, default=20)
p.add_argument("--seconds", default="4")
a = p.parse_args()
out_dir = os.environ.get("OUT", ".")
rows = []
for i, case in enumerate(a.cases):
    wait, path, main, *envs = case.split("/")
    env = dict(e.split("=", 1) for e in envs)
    t0 = time.monotonic()
    rc, out = run_child("--wait", wait, "--path", path, "--main", main, "--seconds", a.seconds, env=env,
                        timeout=a.timeout)
    dt = time.monotonic() - t0
    if rc != 0:  # the device tool brings back few files: only the failures' logs
        with open(os.path.join(out_dir, f"case{i}.txt"), "w") as f:
            f.write(f"{case}\n{out}")
    last = [ln for ln in out.splitlines() if ln.startswith(("ok ", "FAIL"))]
    rows.append((case, "HANG" if rc is None else f"rc={rc}", f"{dt:.1f}s", last[-1] if last else "-"))
    print(f"| {' | '.join(rows[-1])} |", flush=True)
print("\n| case | result | time | last line |\n|---|---|---|---|")
for r in rows:
    print(f"| {' | '.join(r)} |")
