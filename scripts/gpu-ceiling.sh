#!/usr/bin/env bash
# The engine at CAM's scale and pread's latency (issue 14), on the GPU machine, one call (~5 minutes):
#   GPUIO_STEPS=none bash scripts/gpu-check.sh     # once per machine: liburing, CUDA build into /tmp
#   bash scripts/gpu-ceiling.sh                    # rebuilds this tree's changes, runs the grid, prints one table
# Runs benchmarks/engine_ceiling.py: N = 1,4,8,12,16 emulated devices (null, sim free-running, sim paced,
# /dev/shm files via uring) x workers 1,2,3,4,6,8 x destinations host and GPU memory (the engine's GPU path:
# staging -> GPU by copy engine, 0 SMs); the controller's worker count next to the best hand-picked one; one-block
# latency (engine into host memory, stream-ordered and GPU-initiated into GPU memory) vs pread O_DIRECT on the
# machine's disk ($GPUIO_DATA, the gpu-check data file, when it exists; else a 256 MiB file in this checkout).
# Output: $OUT/ceiling.txt (every run), $OUT/ceiling.json; the summary table on stdout.
# Environment: GPUIO_CEILING_ARGS (more engine_ceiling.py flags, e.g. "--seconds 0.3"), GPUIO_CEILING_COPY (batch),
#   GPUIO_CEILING_INFLIGHT (batches in flight, 4).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out=${OUT:-$repo/gpu-ceiling-out}
mkdir -p "$out"
source scripts/gpu-reuse-build.sh
lat=${GPUIO_DATA:-$repo/gpuio-gpu-bench.bin}
[[ -f $lat ]] || lat=$repo/gpuio-ceiling-lat.bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "cpus: $(nproc); latency file: $lat on $(df --output=source "$(dirname "$lat")" | tail -1); date: $(date -u +%FT%TZ)"
# 4 batches in flight (GPUIO_CEILING_INFLIGHT): with 2, ordered GPU reads of sim/paced devices idled at each batch's
# tail (H100, 588d636: "depth/latency"); host rows get the same depth.
timeout 470 python3 benchmarks/engine_ceiling.py --kinds paced,null,sim,shm-uring --dests gpu,host --seconds 0.3 \
  --inflight "${GPUIO_CEILING_INFLIGHT:-4}" --latency-file "$lat" \
  --copy "${GPUIO_CEILING_COPY:-batch}" --json "$out/ceiling.json" ${GPUIO_CEILING_ARGS:-} > "$out/ceiling.txt" 2>&1
rc=$?
# Is the copy engine the bound at 12 devices? The same point with the gather kernel (uses SMs: reported).
timeout 60 python3 benchmarks/engine_ceiling.py --kinds null,sim --dests gpu --devices 12 --workers 4,6 --seconds 0.3 \
  --inflight "${GPUIO_CEILING_INFLIGHT:-4}" --copy kernel --sections grid --json "$out/ceiling-kernel-copy.json" > "$out/ceiling-kernel-copy.txt" 2>&1
# One table: the per-N summary, then the judged 12-device lines, the controller, the sim's own cost and latency.
grep -E "^SKIP|^host:|^sim backend's own cost" "$out/ceiling.txt"
sed -n '/^| kind/,/^$/p' "$out/ceiling.txt" | grep "^|"
grep -E "^JUDGED|^controller|^latency|^wall time|FAILED|Error|Traceback" "$out/ceiling.txt"
echo "same 12-device point, staging->GPU by gather kernel (SMs) instead of copy engine:"
grep -E "^JUDGED|Error|Traceback" "$out/ceiling-kernel-copy.txt"
if ((rc)); then  # cut short (124: the time limit): the runs it made, 12-device ones first; JSON holds every kind done
  echo "engine_ceiling.py exit $rc (see $out/ceiling.txt); its 12-device runs:"
  grep " N=12 " "$out/ceiling.txt"
  tail -3 "$out/ceiling.txt"
fi
exit $rc
