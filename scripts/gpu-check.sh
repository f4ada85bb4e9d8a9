#!/usr/bin/env bash
# One call on the GPU machine (issue 3): build the CUDA variant with this machine's python3, run the GPU
# tests, run the GPU benchmarks (cold cache), print one table. Details go to $OUT (or ./gpu-check-out).
#   bash scripts/gpu-check.sh [--quick]
# Carried inputs (git-ignored, named in the device tool's `carry`): .carry/*.deb (liburing2, liburing-dev:
# the GPU machine has no liburing-dev), .carry/iobench.c (the raw reference, ../shared/tools), .whl/ (KvikIO).
# Environment: GPUIO_DATA (data file; default: a file in this checkout), GPUIO_DATA_GIB (default 8).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out=${OUT:-$repo/gpu-check-out}
mkdir -p "$out"
quick=0
[[ "${1:-}" == "--quick" ]] && quick=1
summary=$out/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
step() { echo; echo "=== $* ==="; }
status=0

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
data=${GPUIO_DATA:-$repo/gpuio-gpu-bench.bin}
data_gib=${GPUIO_DATA_GIB:-8}
((quick)) && data_gib=1
df -h "$(dirname "$data")" /tmp /dev/shm 2>/dev/null
lsblk -o NAME,SIZE,ROTA,TYPE,MOUNTPOINT 2>/dev/null | head -20
note "data file: $data on $(df --output=source "$(dirname "$data")" | tail -1) ($(findmnt -n -o FSTYPE --target "$(dirname "$data")"))"

step "liburing (carried .debs) and iobench"
uring=/tmp/uring
rm -rf $uring && mkdir -p $uring
for f in .carry/liburing*.deb; do dpkg -x "$f" $uring; done
pc=$uring/usr/lib/x86_64-linux-gnu/pkgconfig
sed -i "s|=/usr|=$uring/usr|" $pc/liburing*.pc  # the .pc names /usr paths outright
export PKG_CONFIG_PATH=$pc
export LD_LIBRARY_PATH=$uring/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
gcc -O2 -o /tmp/iobench .carry/iobench.c -I$uring/usr/include -L$uring/usr/lib/x86_64-linux-gnu -luring -lpthread \
  || { note "iobench build FAILED"; status=1; }

step "build (CUDA variant)"
build=/tmp/gpuio-build
site=/tmp/gpuio-site
t0=$(date +%s)
rm -rf $build  # a warm machine keeps the last configure (and its cached liburing paths)
cmake -S . -B $build -G Ninja -DGPUIO_CUDA=ON -DGPUIO_BUILD_PYTHON=ON -DGPUIO_BUILD_TESTS=OFF \
  -DPython_EXECUTABLE="$(command -v python3)" > "$out/build.log" 2>&1 && cmake --build $build -j16 >> "$out/build.log" 2>&1
rc=$?
tail -5 "$out/build.log"
if ((rc)); then note "BUILD FAILED (see build.log)"; cp "$out/build.log" "$out/build-failed.log"; exit 1; fi
rm -rf $site && mkdir -p $site && cp -r python/gpuio $site/ && cp $build/cpp/src/bindings/_core*.so $site/gpuio/
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/whl-site .whl/*.whl \
    && note "KvikIO wheels installed" || note "KvikIO wheel install FAILED"
fi
export PYTHONPATH=$site:/tmp/whl-site
export PYTHONUNBUFFERED=1
nv="nvcc -O2 -std=c++17 -arch=sm_90 -Icpp/include"
$nv tests/cuda/test_device_api.cu $build/cpp/libgpuio.a -L$uring/usr/lib/x86_64-linux-gnu -luring -o /tmp/test_device_api \
  && $nv examples/cam_pipeline.cu $build/cpp/libgpuio.a -L$uring/usr/lib/x86_64-linux-gnu -luring -o /tmp/cam_pipeline \
  || { note "CUDA test/example build FAILED"; status=1; }
note "build: $(( $(date +%s) - t0 )) s"

step "gpuio info"
python3 -c "from gpuio.cli.info import info; info(json_out=False)" 2>&1 | tee "$out/info.txt" || true

step "GPU tests"
# -s: each test prints its name as it starts and a hang's faulthandler dump (test_gpu.py's watchdog,
# TEST_GPU_TIMEOUT_S) reaches the log; the whole log goes to $OUT, its end to the console.
TEST_GPU_TIMEOUT_S=40 timeout 200 python3 -m pytest -v -s -p no:cacheprovider tests/python/test_gpu*.py \
  tests/python/test_examples_cam.py -rs > "$out/pytest.txt" 2>&1
grep -E "^\[test_gpu\]|PASSED|FAILED|SKIPPED|ERROR|Timeout|File \"|Thread|passed|failed" "$out/pytest.txt" | tail -60
grep -qE "[0-9]+ passed" "$out/pytest.txt" && ! grep -qE "[0-9]+ (failed|error)" "$out/pytest.txt" \
  && note "pytest GPU: $(tail -1 "$out/pytest.txt")" \
  || { note "pytest GPU FAILED: $(tail -1 "$out/pytest.txt")"; status=1; }
timeout 60 /tmp/test_device_api /tmp/device_api_test.bin 2>&1 | tail -3 | tee -a "$summary" || status=1

step "GPU benchmarks (cold cache)"
bench_args=(--file "$data" --gib "$data_gib" --iobench /tmp/iobench --out "$out/gpu_bench.json")
python3 -c "import kvikio" 2>/dev/null && bench_args+=(--kvikio)
((quick)) && bench_args+=(--reads 65536)
[[ -n ${GPUIO_BENCH_ONLY:-} ]] && bench_args+=(--only "$GPUIO_BENCH_ONLY")  # e.g. raw,rand,seq,latency
timeout 330 python3 benchmarks/gpu_bench.py "${bench_args[@]}" 2>&1 | tee "$out/gpu_bench.txt" | grep -v "^|"
[[ ${GPUIO_SKIP_CAM:-0} == 1 ]] || CAM_DROP_CACHES=1 timeout 90 /tmp/cam_pipeline "$data" 1024 2>&1 | tee "$out/cam_pipeline.txt" | tail -3
tail -2 "$out/cam_pipeline.txt" >> "$summary"
if [[ -f examples/cam_pipeline.py && ${GPUIO_SKIP_CAM:-0} != 1 ]]; then
  timeout 150 python3 examples/cam_pipeline.py --file "$data" --limit-gib 2 --cold 2>&1 | tee "$out/cam_pipeline_py.txt" \
    | tail -3 | tee -a "$summary"
fi

# Issue 2's engine-vs-raw numbers (host destinations), from the same call, once `gpuio bench` exists.
if [[ -f python/gpuio/cli/bench.py && ${GPUIO_SKIP_BENCH:-0} != 1 ]]; then  # GPUIO_SKIP_BENCH=1: GPU-path work only
  step "gpuio bench (issue 2: host destinations, uring and posix, cold cache)"
  (cd /tmp && python3 -m gpuio.cli bench --quick --json "$out/gpuio_bench.json" 2>&1 | tail -25 | tee "$out/gpuio_bench.txt")
fi
# OPTIONAL steps (other engineers' benchmarks): with GPUIO_OPTIONAL=1, run when their files exist.
if [[ ${GPUIO_OPTIONAL:-0} == 1 && -f benchmarks/gnn_epoch.py ]]; then
  step "OPTIONAL: benchmarks/gnn_epoch.py"
  timeout 240 python3 benchmarks/gnn_epoch.py 2>&1 | tail -15 | tee "$out/gnn_epoch.txt"
fi
if [[ ${GPUIO_OPTIONAL:-0} == 1 && -f benchmarks/streams_bench.py ]]; then
  step "OPTIONAL: benchmarks/streams_bench.py"
  timeout 240 python3 benchmarks/streams_bench.py 2>&1 | tail -15 | tee "$out/streams_bench.txt"
fi

step "summary"
cat "$summary"
grep "^|" "$out/gpu_bench.txt"
exit $status
