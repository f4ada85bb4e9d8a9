#!/usr/bin/env bash
# Issue 14's controller bar on the GPU machine, one call (~2-3 minutes once built): the engine's own worker count for
# N = 1,4,8,12,16 sim (free-running) and /dev/shm uring devices next to the best hand-picked count, judged on
# 1-second re-measurements in the same pass (gpuio.bench.ceiling_controller).
#   bash scripts/gpu-controller.sh        # builds this tree (scripts/gpu-check.sh's build, reused when there)
# Output: $OUT/controller.txt (every run), $OUT/controller.json; on stdout the controller lines, its table and the
# JUDGED line (worst choice ratio, how many within 10 %).
# Environment: GPUIO_CONTROLLER_ARGS (more engine_ceiling.py flags).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out=${OUT:-$repo/gpu-controller-out}
mkdir -p "$out"
source scripts/gpu-reuse-build.sh
timeout 330 python3 benchmarks/engine_ceiling.py --kinds sim,shm-uring --dests host --devices 1,4,8,12,16 \
  --workers 1,2,3,4,5,6,7,8 --sections grid,controller --seconds 0.3 --judge-seconds 1 --inflight 2 \
  --json "$out/controller.json" ${GPUIO_CONTROLLER_ARGS:-} > "$out/controller.txt" 2>&1
rc=$?
grep -E "^(sim|shm-uring) +host +N=(4|8|16) " "$out/controller.txt" | awk '{printf "%s N=%s W=%s %s M | ", $1, substr($3,3), substr($4,3), $5} END {print ""}' | fold -w 200
grep -E "^controller " "$out/controller.txt"
sed -n '/^| kind | dest | N | chosen W/,/^JUDGED controller/p' "$out/controller.txt"
grep -E "^wall time|Error|Traceback" "$out/controller.txt"
((rc)) && { echo "engine_ceiling.py exit $rc (see $out/controller.txt)"; tail -5 "$out/controller.txt"; }
exit $rc
