#!/usr/bin/env bash
# Issue 14's scaling-efficiency bar on the GPU machine, one call (~1-2 minutes once built): 4 KiB random reads into
# GPU memory from N = 1,4,8,12 emulated devices, workers up to 6, 0 SMs. Kinds: paced-null (the judged one: per
# device a latency and a link rate of its own, 11.4 us / 0.78 M reads/s by default, and no model or data work on the
# host, like a drive that does its flash work and DMA in hardware; no data is produced), paced (the flash model and
# the 4 KiB copy on the worker's core: the figure before), null (zero latency: the engine's own ceiling at each N).
#   bash scripts/gpu-scaling.sh        # builds this tree (scripts/gpu-check.sh's build, reused when there)
# Output: $OUT/scaling.txt (every run), $OUT/scaling.json; on stdout the per-N table and the JUDGED lines (the
# scaling line names the first N below 0.9 x N x one device and the bound named there).
# Environment: GPUIO_SCALING_ARGS (more engine_ceiling.py flags).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out=${OUT:-$repo/gpu-scaling-out}
mkdir -p "$out"
source scripts/gpu-reuse-build.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 400 python3 benchmarks/engine_ceiling.py --kinds paced-null,paced,null --dests gpu --devices 1,4,8,12 \
  --workers 1,2,3,4,6 --seconds 0.4 --inflight 4 --copy batch --sections grid --json "$out/scaling.json" \
  ${GPUIO_SCALING_ARGS:-} > "$out/scaling.txt" 2>&1
rc=$?
grep -E "^SKIP|^host:" "$out/scaling.txt"
sed -n '/^| kind/,/^$/p' "$out/scaling.txt" | grep "^|"
grep -E "^JUDGED|^wall time|FAILED|Error|Traceback" "$out/scaling.txt"
((rc)) && { echo "engine_ceiling.py exit $rc (see $out/scaling.txt)"; grep " N=12 " "$out/scaling.txt"; tail -3 "$out/scaling.txt"; }
exit $rc
