# Suites of scripts/gpu.sh (sourced): the GPU check, the README's demo, the engine against the device, and the
# smaller benchmarks. Each suite is a function suite_<name> run from the repository root after the build prologue;
# its steps go through `bounded` (lib.sh), so each has a limit, a log under $OUT/<suite>/ and a row in the table.

# say NAME N: the last N lines of step NAME's log into the summary (nothing under --dry-run)
say() { ((GPU_DRY)) || [[ ! -f $OUT/$suite/$1.txt ]] || tail -n "$2" "$OUT/$suite/$1.txt" | tee -a "$summary"; }
log_of() { echo "$OUT/$suite/$1.txt"; }
data_file() { on "${GPUIO_DATA:-$repo/gpuio-gpu-bench.bin}"; }  # on the device of the pass (lib.sh `on`)

suite build build "the build prologue alone (liburing, iobench, the CUDA build, the carried wheels): a warm machine \
for the calls after it"
suite_build() {
  ((GPU_DRY)) || note "gpuio built: $("$py" -c 'import gpuio; print(gpuio.__version__, gpuio.__file__)' 2>&1)"
}

suite check build "GPU tests (pytest -m gpu tests/python: every test marked gpu), the device-API program, the GPU \
benchmarks cold (gpu_bench.py: GPUIO_DATA, GPUIO_DATA_GIB=8, GPUIO_BENCH_ONLY, GPUIO_SKIP_GPU_BENCH=1, GPUIO_QUICK=1), \
the CAM pipelines (GPUIO_SKIP_CAM=1 leaves them out)"
suite_check() {
  local data data_gib=${GPUIO_DATA_GIB:-8} status=0
  data=$(data_file)
  [[ ${GPUIO_QUICK:-0} == 1 ]] && data_gib=1
  ((GPU_DRY)) || note "data file: $data on $(df --output=source "$(dirname "$data")" | tail -1) ($(findmnt -n -o FSTYPE --target "$(dirname "$data")"))"
  nvprog test_device_api tests/cuda/test_device_api.cu || status=1
  [[ ${GPUIO_SKIP_CAM:-0} == 1 ]] || nvprog cam_pipeline examples/cam_pipeline.cu || status=1
  # The GPU tests are chosen by their marker (pyproject.toml), wherever they live under tests/python. -s: each test
  # prints its name as it starts, and a hang's faulthandler dump (gpu_util's watchdog, TEST_GPU_TIMEOUT_S) reaches
  # the log. --continue-on-collection-errors: a CPU test module that cannot be imported here (a package this machine
  # lacks) is reported as an error, and fails the step, without keeping the GPU tests from running.
  TEST_GPU_TIMEOUT_S=60 GPUIO_TAIL=60 BOUNDED_SHOW="^\[test_gpu\]|PASSED|FAILED|SKIPPED|ERROR|Timeout|File \"|Thread|passed|failed" \
    bounded pytest-gpu 420 "$py" -m pytest -v -s -p no:cacheprovider -m gpu --continue-on-collection-errors \
    tests/python -rs
  if ((!GPU_DRY)); then
    local log; log=$(log_of pytest-gpu)
    local counts; counts=$(grep -E "[0-9]+ (passed|failed|error)" "$log" | tail -1)  # pytest's last line (warnings follow)
    if grep -qE "[0-9]+ passed" <<< "$counts" && ! grep -qE "[0-9]+ (failed|error)" <<< "$counts"; then
      note "pytest GPU: $counts"
    else note "pytest GPU FAILED: ${counts:-$(tail -1 "$log")}"; status=1; fi
  fi
  GPUIO_TAIL=3 bounded device-api 60 /tmp/test_device_api "$(on /tmp/device_api_test.bin)" || status=1
  say device-api 2
  [[ ${GPUIO_SKIP_GPU_BENCH:-0} == 1 ]] && return $status
  local args=(--file "$data" --gib "$data_gib" --out "$OUT/$suite/gpu_bench.json")
  [[ -n $iobench ]] && args+=(--iobench "$iobench")
  ((GPU_DRY)) || ! "$py" -c "import kvikio" 2>/dev/null || args+=(--kvikio)
  [[ ${GPUIO_QUICK:-0} == 1 ]] && args+=(--reads 65536)
  [[ -n ${GPUIO_BENCH_ONLY:-} ]] && args+=(--only "$GPUIO_BENCH_ONLY")  # e.g. raw,rand,seq,latency
  BOUNDED_SHOW="^[^|]" bounded gpu-bench 330 "$py" benchmarks/gpu_bench.py "${args[@]}" || status=1
  [[ ${GPUIO_SKIP_CAM:-0} == 1 ]] && return $status
  GPUIO_TAIL=3 CAM_DROP_CACHES=1 bounded cam-pipeline 90 /tmp/cam_pipeline "$data" 1024 || status=1
  say cam-pipeline 2
  GPUIO_TAIL=3 bounded cam-pipeline-py 150 "$py" examples/cam_pipeline.py --file "$data" --limit-gib 2 --cold || status=1
  say cam-pipeline-py 3
  return $status
}

suite host build "gpuio bench: the engine (uring, posix) against the raw device, host destinations, cold cache \
(GPUIO_BENCH_SIZE=4G, GPUIO_BENCH_REPEATS=3, GPUIO_BENCH_SECONDS=1.5, GPUIO_BENCH_EXTRA)"
suite_host() {
  local args=(--size "${GPUIO_BENCH_SIZE:-4G}" --repeats "${GPUIO_BENCH_REPEATS:-3}" --seconds "${GPUIO_BENCH_SECONDS:-1.5}"
              --workload read ${GPUIO_BENCH_EXTRA:-})
  host_bench 420 "${args[@]}"
}
suite host-quick build "gpuio bench --quick (CI-sized), host destinations, cold cache"
suite_host_quick() { host_bench 200 --quick; }
host_bench() {
  local cap=$1; shift
  GPUIO_TAIL=16 bounded gpuio-bench "$cap" "$py" -m gpuio bench "$@" --file "$(on "$repo/gpuio-bench.dat")" --cold --json "$OUT/$suite/gpuio_bench.json" \
    --plot "$OUT/$suite/gpuio_bench.png" || return 1
  ((GPU_DRY)) || "$py" -m gpuio_apps.bench.markdown "$OUT/$suite/gpuio_bench.json" >> "$summary" 2>&1 || true
}

suite demo build "gpuio demo as the README runs it, from an empty directory, bounded (GPUIO_DEMO_TIMEOUT=300, \
GPUIO_DEMO_ARGS)"
suite_demo() { demo_run demo "${GPUIO_DEMO_TIMEOUT:-300}" ${GPUIO_DEMO_ARGS:-}; }

suite demo-hetero build "gpuio demo --hetero as the README runs it, from an empty directory, bounded \
(GPUIO_DEMO_HETERO_TIMEOUT=300, GPUIO_DEMO_HETERO_ARGS)"
suite_demo_hetero() { demo_run demo-hetero "${GPUIO_DEMO_HETERO_TIMEOUT:-300}" --hetero ${GPUIO_DEMO_HETERO_ARGS:-}; }

# demo_run STEP LIMIT ARGS...: `gpuio demo ARGS` in a fresh empty directory, bounded; its time and headline noted
demo_run() {
  local step=$1 limit=$2 d t0 rc
  shift 2
  d=$(tmp_root)/gpuio-demo-XXXXXX
  ((GPU_DRY)) || d=$(mktemp -d "$d")
  t0=$(date +%s)
  COLUMNS=160 GPUIO_TAIL=50 indir "$d" bounded "$step" "$limit" "$py" -X faulthandler -m gpuio demo "$@"
  rc=$?
  ((GPU_DRY)) && return 0
  if ((rc)); then note "gpuio demo $* FAILED (rc=$rc$( ((rc == 124)) && echo ', timed out'), $(( $(date +%s) - t0 )) s)"
  else note "gpuio demo $*: ok in $(( $(date +%s) - t0 )) s (empty directory $d): $(demo_headline "$(log_of "$step")")"; fi
  rm -rf "$d"
  return $rc
}

# demo_headline LOG: "gpuio X s/epoch vs mmap Y s/epoch ...: Z x" (one line even where the console wrapped it)
demo_headline() { awk '/^gpuio [0-9.]+ s\/epoch/ { l = $0; if (l !~ /x *$/ && (getline n) > 0) l = l " " n; print l; exit }' "$1"; }

suite latency build "one-block latency: engine, stream-ordered and GPU-initiated reads against pread O_DIRECT on \
the data file (engine_ceiling.py --sections latency)"
suite_latency() {
  local data; data=$(data_file)
  BOUNDED_SHOW="^latency|pread|JUDGED|Error|Traceback" bounded latency 300 "$py" benchmarks/engine_ceiling.py \
    --sections latency --latency-file "$data" --json "$OUT/$suite/latency.json"
}

suite streams build "stream store vs raw sequential, cold (streams_bench.py --bytes 4G), and the stream-cache \
example in a memory cgroup (GPUIO_CACHE_MEM=1536M, GPUIO_CACHE_DATASET=4G, GPUIO_CACHE_TIMEOUT=300)"
suite_streams() {
  local status=0 work dir
  work=$(on "$repo/.check-work/stream-cache") dir=$(on "$repo")
  run mkdir -p "$dir"
  bounded streams-bench 200 "$py" benchmarks/streams_bench.py --bytes 4G --repeats 5 --dir "$dir" \
    --json "$OUT/$suite/streams_bench.json" || status=1
  say streams-bench 6
  run rm -f "$dir"/streams-bench*.bin  # the disk is 64 GiB: room for the next steps
  drop_caches
  run mkdir -p "$work"
  in_cgroup "${GPUIO_CACHE_MEM:-1536M}" bounded stream-cache "${GPUIO_CACHE_TIMEOUT:-300}" "$py" examples/stream_cache.py \
    --dataset "${GPUIO_CACHE_DATASET:-4G}" --epochs 2 --dir "$work" || status=1
  say stream-cache 8
  run rm -rf "$work"
  return $status
}

suite sim build "engine over 8 emulated flash devices (sim backend, paced) vs 8 x one device, <= 4 workers"
suite_sim() { bounded sim-scaling 120 "$py" benchmarks/sim_scaling.py --json "$OUT/$suite/sim_scaling.json"; say sim-scaling 6; }

suite gnn build "GNN epoch, memory-constrained (gnn_epoch.py in a GPUIO_GNN_MEM=4G cgroup, cold; GPUIO_GNN_ARGS \
sizes it, GPUIO_GNN_TIMEOUT=420), after a seconds-long CUDA smoke run"
suite_gnn() {
  local status=0 tiny work
  tiny=$(on /tmp/gnn-tiny) work=$(on "$repo")
  run mkdir -p "$tiny" "$work"
  bounded gnn-tiny 90 "$py" benchmarks/gnn_epoch.py --tiny --workdir "$tiny" --json "$OUT/$suite/gnn_epoch_tiny.json" \
    || { note "gnn_epoch --tiny FAILED"; status=1; }
  GPUIO_TAIL=25 bounded gnn-epoch "${GPUIO_GNN_TIMEOUT:-420}" "$py" benchmarks/gnn_epoch.py --cgroup-mem "${GPUIO_GNN_MEM:-4G}" \
    --drop-caches --workdir "$work" ${GPUIO_GNN_ARGS:-} --json "$OUT/$suite/gnn_epoch.json" || status=1
  say gnn-epoch 12
  return $status
}

suite kvikio build "KvikIO with the real library (carry .whl/: kvikio-cu13, libkvikio-cu13, rapids-logger): its \
GPU tests, then gpu_bench.py's KvikIO peer beside gpuio on a 2 GiB file"
suite_kvikio() {
  local status=0 data; data=$(data_file)
  ((GPU_DRY)) || "$py" -c "import kvikio" 2>/dev/null || note "kvikio does not import: carry .whl/ (docs/BENCHMARKS.md)"
  GPUIO_TAIL=20 bounded pytest-kvikio 300 "$py" -m pytest -v -p no:cacheprovider \
    tests/python/apps/papers/test_gpu_kvikio.py tests/python/apps/papers/test_apps_kvikio.py -rs || status=1
  local args=(--file "$data" --gib "${GPUIO_DATA_GIB:-2}" --only raw,rand,kvikio --kvikio --out "$OUT/$suite/gpu_bench.json")
  [[ -n $iobench ]] && args+=(--iobench "$iobench")
  bounded gpu-bench-kvikio 200 "$py" benchmarks/gpu_bench.py "${args[@]}" || status=1
  return $status
}

suite gather build "cache-missing gather rate, rows to CUDA and to the CPU, beside the raw device \
(gather_rate.py; GPUIO_GATHER_ROWS=100000, _BATCH=8192, _FILE_MIB=4096, _REPEATS=5), then iobench on the same file"
suite_gather() {
  local status=0 dir dev
  dir=$(on /tmp/gr)
  bounded pytest-tensor 240 "$py" -m pytest -q -p no:cacheprovider tests/python/tensor/test_tensor_file.py \
    tests/python/cache/test_cache_store.py tests/python/cache/test_cache_page.py || status=1
  run mkdir -p $dir
  for dev in cuda cpu; do
    GPUIO_TAIL=15 bounded "gather-$dev" 240 "$py" benchmarks/gather_rate.py --workdir $dir --device $dev \
      --rows "${GPUIO_GATHER_ROWS:-100000}" --batch "${GPUIO_GATHER_BATCH:-8192}" --file-mib "${GPUIO_GATHER_FILE_MIB:-4096}" \
      --repeats "${GPUIO_GATHER_REPEATS:-5}" --json "$OUT/$suite/gather_rate_$dev.json" || status=1
  done
  if [[ -n $iobench ]]; then  # the raw device on the same file: 4 KiB random read, O_DIRECT io_uring, QD128, 4 s
    bounded iobench-2thr 20 "$iobench" $dir/gather_rate_4096.npy 4096 128 2 4 1 0 0 1
    bounded iobench-1thr 20 "$iobench" $dir/gather_rate_4096.npy 4096 128 1 4 1 0 0 1
  fi
  return $status
}

suite threads build "the loader-thread matrix: a background thread reads through gpuio into GPU memory while the \
main thread launches CUDA work, one fresh process per case (GPUIO_THREADS_CASES: wait/path/main[/ENV=V] ...)"
suite_threads() {
  local cases=${GPUIO_THREADS_CASES:-"kernel/store/all wait_value/store/all kernel/stream/all wait_value/stream/all kernel/event/all wait_value/event/all kernel/store/all/CUDA_MODULE_LOADING=EAGER"}
  GPUIO_TAIL=20 bounded threads-matrix 400 "$py" tests/python/gpu/gpu_threads_matrix.py --timeout 25 $cases
}

suite compare-demo none "gpuio demo for an older tree and this one, built and run on one machine, alternating \
(GPUIO_COMPARE_OLD=.carry/old-REV.tgz from \`git archive REV | gzip\`, GPUIO_COMPARE_RUNS=2)"
suite_compare_demo() {
  local old_tgz=${GPUIO_COMPARE_OLD:-} runs=${GPUIO_COMPARE_RUNS:-2} old=/tmp/gpuio-old-tree status=0 i which d
  [[ -n $old_tgz ]] || { note "compare-demo: set GPUIO_COMPARE_OLD to the old tree's .tgz (git archive REV | gzip)"; return 2; }
  ((GPU_DRY)) || [[ -f $old_tgz ]] || { note "compare-demo: no such archive: $old_tgz"; return 2; }
  uring_setup || return 1
  run rm -rf $old; run mkdir -p $old; run tar -xzf "$old_tgz" -C $old
  build_tree $old /tmp/gpuio-build-old /tmp/gpuio-site-old -DGPUIO_CUDA=ON || return 1
  build_tree "$repo" $build $site -DGPUIO_CUDA=ON || return 1
  for i in $(seq 1 "$runs"); do
    for which in old new; do
      local s=$site; [[ $which == old ]] && s=/tmp/gpuio-site-old
      d=$(tmp_root)/gpuio-demo-XXXXXX; ((GPU_DRY)) || d=$(mktemp -d "$d")
      COLUMNS=160 GPUIO_TAIL=2 PYTHONPATH=$s indir "$d" bounded "demo-$which-$i" 300 "$py" -X faulthandler -m gpuio demo || status=1
      ((GPU_DRY)) || note "$which run $i: memory/gpuio/mmap $(grep -m1 "epoch s" "$(log_of "demo-$which-$i")" | tr -s ' │┃|' ' ' | sed 's/.*epoch s//') | $(demo_headline "$(log_of "demo-$which-$i")")"
      run rm -rf "$d"
    done
  done
  return $status
}

suite devarray build "device arrays and graph apps on the GPU: the CUDA device-array program, then pytest of \
test_device_array.py and test_graph_apps.py"
suite_devarray() {
  local status=0
  nvprog test_device_array tests/cuda/test_device_array.cu || return 1
  GPUIO_TAIL=3 bounded device-array-cu 120 /tmp/test_device_array "$(on /tmp/device_array_test.bin)" || status=1
  BOUNDED_SHOW="PASSED|FAILED|SKIPPED|ERROR|passed|failed" GPUIO_TAIL=40 bounded pytest-graph 400 "$py" -m pytest -v \
    -p no:cacheprovider tests/python/tensor/test_device_array.py tests/python/apps/papers/test_graph_apps.py -rs \
    || status=1
  return $status
}

suite apps-io build "the applications' read path alone on a GPUIO_APPS_IO_MIB=4096 MiB file, cold: pread re-reads, \
engine chunks, CUDA reads with host / GPU block ids, pread + cudaMemcpy (apps_io_path.py)"
suite_apps_io() {
  local dir; dir=$(on /var/tmp/apps)
  run mkdir -p "$dir"
  GPUIO_TAIL=12 bounded apps-io 90 "$py" benchmarks/apps_io_path.py --mib "${GPUIO_APPS_IO_MIB:-4096}" --cold --device cuda \
    --file "$dir/io-path.bin" --json "$OUT/$suite/apps_io.json"
  local rc=$?
  run rm -f "$dir/io-path.bin"
  return $rc
}

suite apps-tiny build "each application at the tiny size on CUDA, one bounded step each (GPUIO_APPS_TINY=\"sort \
vecadd resize gpt2\")"
suite_apps_tiny() {
  local a status=0 dir; dir=$(on /tmp/apps-tiny)
  run mkdir -p "$dir"
  for a in ${GPUIO_APPS_TINY:-sort vecadd resize gpt2}; do
    GPUIO_TAIL=6 indir "$dir" bounded "app-$a" 60 "$py" "$repo/benchmarks/apps_bench.py" --size tiny --device cuda \
      --apps "$a" || status=1
  done
  return $status
}
