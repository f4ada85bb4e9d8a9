#!/usr/bin/env bash
# Device arrays and graph apps on the GPU machine (issue 12 items 1-2). Each call fits the device's 10 minutes:
#   bash scripts/gpu-graph.sh tests                # CUDA test + GPU pytest of DeviceArray and the graph apps
#   bash scripts/gpu-graph.sh build 26             # Kronecker 2^26 graph into $GPUIO_GRAPH_DIR (no cgroup)
#   bash scripts/gpu-graph.sh bench 26 bfs         # graph_bench in a memory cgroup, cold, JSON to $OUT
# Uses the CUDA build that scripts/gpu-check.sh leaves in /tmp (made here first when missing, with GPUIO_STEPS=none
# and the same carried .carry/ inputs). Environment: GPUIO_GRAPH_DIR (default /var/tmp/gpuio-graph-s<scale>),
# GPUIO_GRAPH_MEM (cgroup memory.max, default 6G: well below the edge files), GPUIO_GRAPH_ARGS (more bench flags),
# GPUIO_GRAPH_SOURCES (default gpuio-array,pread+copy,memmap+copy).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out=${OUT:-$repo/gpu-graph-out}
mkdir -p "$out"
what=${1:-tests}
scale=${2:-26}
algos=${3:-bfs}
dir=${GPUIO_GRAPH_DIR:-/var/tmp/gpuio-graph-s$scale}
source scripts/gpu-reuse-build.sh

case $what in
  tests)
    nvcc -O2 -std=c++17 -arch=sm_90 -Icpp/include tests/cuda/test_device_array.cu $build/cpp/libgpuio.a \
      -L$uring/usr/lib/x86_64-linux-gnu -luring -o /tmp/test_device_array || exit 1
    timeout 120 /tmp/test_device_array /tmp/device_array_test.bin 2>&1 | tee "$out/test_device_array.txt" | tail -3
    rc1=${PIPESTATUS[0]}
    timeout 400 python3 -m pytest -v -p no:cacheprovider tests/python/test_device_array.py tests/python/test_graph_apps.py \
      -rs > "$out/pytest-graph.txt" 2>&1
    rc2=$?
    grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed" "$out/pytest-graph.txt" | tail -40
    exit $(( rc1 || rc2 ))
    ;;
  build)
    timeout 560 python3 benchmarks/graph_bench.py --scale "$scale" --data-dir "$dir" --build-only 2>&1 | tee "$out/graph-build.txt"
    df -h "$dir" | tail -1
    ;;
  bench)
    cg=/sys/fs/cgroup/gpuio-graph-$$
    grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || echo +memory > /sys/fs/cgroup/cgroup.subtree_control
    mkdir -p $cg && echo "${GPUIO_GRAPH_MEM:-6G}" > $cg/memory.max || { echo "cgroup could not be made"; exit 1; }
    (echo $BASHPID > $cg/cgroup.procs && exec timeout 570 python3 benchmarks/graph_bench.py --scale "$scale" \
      --data-dir "$dir" --algos "$algos" --sources "${GPUIO_GRAPH_SOURCES:-gpuio-array,pread+copy,memmap+copy}" \
      --cold --json "$out/graph_bench_s${scale}_${algos//,/-}.json" ${GPUIO_GRAPH_ARGS:-}) 2>&1 | tee "$out/graph_bench.txt"
    rc=${PIPESTATUS[0]}
    echo "cgroup memory.peak: $(cat $cg/memory.peak 2>/dev/null)"
    rmdir $cg 2>/dev/null
    exit $rc
    ;;
  *) echo "usage: $0 tests | build SCALE | bench SCALE ALGOS" >&2; exit 2 ;;
esac
