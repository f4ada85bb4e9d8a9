#!/usr/bin/env bash
# Issue 30's judged model-weights run on the GPU machine, one device call (< 10 minutes):
#   bash scripts/gpu-model-load.sh
# builds the CUDA variant (scripts/gpu-check.sh with GPUIO_STEPS=none; needs .carry/ as it does), installs the
# peers' wheels from .whl/ (safetensors, fastsafetensors, runai-model-streamer, humanize) into /tmp/site, runs
# the GPU tests of gpuio.safetensors, then benchmarks/model_load.py on an 8.25 GiB file (cold: caches dropped as
# root; warm; saves; raw reference), whose last lines are the table of ratios. Output and JSON in $OUT.
# Environment: GPUIO_ML_GIB (default 8.25, the issue's file), GPUIO_ML_DIR (default /var/tmp/gpuio-model-load, on the disk),
# GPUIO_ML_ARGS (more arguments for model_load.py, e.g. "--gpuio-variants threads=16"), GPUIO_CALL_S (default 570).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # NVLink multicast off (KINDS.md)
set -uo pipefail
t0=$(date +%s)
cd "$(dirname "$0")/.."
out=${OUT:-$(pwd)/gpu-model-load-out}
mkdir -p "$out"
call=${GPUIO_CALL_S:-570}
GPUIO_STEPS=none OUT=$out bash scripts/gpu-check.sh > "$out/build.txt" 2>&1
if ! ls /tmp/gpuio-site/gpuio/_core*.so > /dev/null 2>&1; then
  tail -20 "$out/build.txt"; echo "build FAILED (see $out/build.txt)"; exit 1
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || echo "wheel install FAILED: the peers will be skipped"
export PYTHONPATH=/tmp/gpuio-site:/tmp/site:$(pwd)/tests/python
export LD_LIBRARY_PATH=/tmp/uring/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
echo "build + wheels: $(( $(date +%s) - t0 )) s"
TEST_GPU_TIMEOUT_S=60 timeout 90 python3 -m pytest -q -p no:cacheprovider tests/python/test_gpu_safetensors.py -rs \
  > "$out/pytest.txt" 2>&1
echo "pytest gpuio.safetensors GPU: $(tail -1 "$out/pytest.txt")"
left=$(( call - ($(date +%s) - t0) ))
budget=$(( left - 150 ))  # no new pass after this; the last passes, the saves and the table fit in the rest
echo "model_load: $left s left, budget $budget s"
timeout $(( left - 5 )) python3 benchmarks/model_load.py --size-gib "${GPUIO_ML_GIB:-8.25}" \
  --dir "${GPUIO_ML_DIR:-/var/tmp/gpuio-model-load}" --json "$out/model_load.json" --budget-s "$budget" \
  ${GPUIO_ML_ARGS:-} 2>&1 | tee "$out/model_load.txt"
