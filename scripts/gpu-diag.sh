#!/usr/bin/env bash
# GPU-machine check of the paths that ran last on the GPU (device arrays, apps, the GPU test suite), each step
# bounded by scripts/gpu-bounded.sh so a hang shows its stacks instead of eating the call.
#   bash scripts/gpu-diag.sh [STEP...]   steps: gpu devarray-bin devarray apps graph (default), apps-io apps-large
set -u
cd "$(dirname "$0")/.."
repo=$(pwd)
export OUT=${OUT:-$repo/gpu-diag-out}; mkdir -p "$OUT"
GPUIO_STEPS=none bash scripts/gpu-check.sh > "$OUT/build.txt" 2>&1 || { tail -30 "$OUT/build.txt"; exit 1; }
grep -E "^build:" "$OUT/build.txt"
export PYTHONPATH=/tmp/gpuio-site:$repo/tests/python LD_LIBRARY_PATH=/tmp/uring/usr/lib/x86_64-linux-gnu
steps=" ${*:-gpu devarray-bin devarray apps graph} "
want() { [[ $steps == *" $1 "* ]]; }
b() { bash "$repo/scripts/gpu-bounded.sh" "$@"; }
want gpu && b 200 pytest-gpu python3 -m pytest -q -p no:cacheprovider tests/python/test_gpu.py tests/python/test_gpu_threads.py
if want devarray-bin; then
  nvcc -O2 -std=c++17 -arch=sm_90 -Icpp/include tests/cuda/test_device_array.cu /tmp/gpuio-build/cpp/libgpuio.a \
    -L/tmp/uring/usr/lib/x86_64-linux-gnu -luring -o /tmp/test_device_array && b 60 devarray-bin /tmp/test_device_array /tmp/device_array_test.bin
fi
want devarray && GPUIO_TAIL=30 b 90 devarray python3 -m pytest -x -q -p no:cacheprovider tests/python/test_device_array.py
if want apps; then
  mkdir -p /tmp/apps && cd /tmp/apps
  for a in ${GPUIO_DIAG_APPS:-sort vecadd resize gpt2}; do
    GPUIO_TAIL=6 b ${GPUIO_DIAG_APP_S:-60} app-$a python3 "$repo/benchmarks/apps_bench.py" --size tiny --device cuda --apps $a
  done
  cd "$repo"
fi
# apps-io: the apps' read path alone on a 4 GiB file, cold: pread re-reads, engine chunks 1 / 16 in flight, CUDA
# reads with block ids on the host / on the GPU, pread + cudaMemcpy (benchmarks/apps_io_path.py; ~30 s)
if want apps-io; then
  mkdir -p /var/tmp/apps && GPUIO_TAIL=12 b ${GPUIO_DIAG_IO_S:-90} apps-io python3 "$repo/benchmarks/apps_io_path.py" \
    --mib ${GPUIO_DIAG_IO_MIB:-4096} --cold --device cuda --file /var/tmp/apps/io-path.bin --json "$OUT/apps-io.json"
  rm -f /var/tmp/apps/io-path.bin
fi
# apps-large: the judged sizes (issue 12), each app bounded on its own, page cache dropped before each pass
if want apps-large; then
  mkdir -p /var/tmp/apps && cd /var/tmp/apps
  for a in ${GPUIO_DIAG_APPS:-gemm vecadd gpt2}; do
    GPUIO_TAIL=24 b ${GPUIO_DIAG_APP_S:-150} large-$a python3 "$repo/benchmarks/apps_bench.py" --size large --device cuda \
      --cold --store /var/tmp/apps --apps $a --json "$OUT/apps-large-$a.json"
    rm -rf /var/tmp/apps/*
  done
  cd "$repo"
fi
want graph && GPUIO_TAIL=30 b 150 graph python3 -m pytest -x -q -p no:cacheprovider tests/python/test_graph_apps.py
exit 0
