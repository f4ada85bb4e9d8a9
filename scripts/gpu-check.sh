#!/usr/bin/env bash
# One call on the GPU machine (issue 3): build the CUDA variant with this machine's python3, run the GPU
# tests, run the GPU benchmarks (cold cache), print one table. Details go to $OUT (or ./gpu-check-out).
#   bash scripts/gpu-check.sh [--quick]
# Carried inputs (git-ignored, named in the device tool's `carry`): .carry/*.deb (liburing2, liburing-dev:
# the GPU machine has no liburing-dev), .carry/iobench.c (the raw reference, ../shared/tools), .whl/ (KvikIO).
# Environment: GPUIO_DATA (data file; default: a file in this checkout), GPUIO_DATA_GIB (default 8).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # the machines keep NVLink multicast off (KINDS.md): keep it so in every child
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
# GPUIO_CALL_S: seconds this whole script may take (the device call's limit less a margin); the steps that know it
# (hetero) fit their timeouts into what is left, so a slow phase cannot eat the later ones. Unset: no deadline.
t_call=$(date +%s)
left() { if [[ -n ${GPUIO_CALL_S:-} ]]; then echo $(( t_call + GPUIO_CALL_S - $(date +%s) )); else echo 999999; fi; }
# within LIMIT RESERVE: a phase's timeout: LIMIT, or what is left of the call less RESERVE when that is smaller
within() { local l=$(( $(left) - $2 )); if (( l < $1 )); then echo $(( l > 1 ? l : 1 )); else echo "$1"; fi; }

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
# A warm machine keeps the last build: ninja rebuilds what changed (liburing is unpacked to the same path).
grep -qs "CMAKE_HOME_DIRECTORY:INTERNAL=$repo$" $build/CMakeCache.txt || rm -rf $build  # another tree's build
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
steps=" ${GPUIO_STEPS:-gpu demo host} "
want() { [[ $steps == *" $1 "* ]]; }
if want gpu; then  # only the gpu step runs these two programs (their nvcc time is spent for nothing otherwise)
$nv tests/cuda/test_device_api.cu $build/cpp/libgpuio.a -L$uring/usr/lib/x86_64-linux-gnu -luring -o /tmp/test_device_api \
  && $nv examples/cam_pipeline.cu $build/cpp/libgpuio.a -L$uring/usr/lib/x86_64-linux-gnu -luring -o /tmp/cam_pipeline \
  || { note "CUDA test/example build FAILED"; status=1; }
fi
note "build: $(( $(date +%s) - t0 )) s"

step "gpuio info"
python3 -c "from gpuio.cli.info import info; info(json_out=False)" 2>&1 | tee "$out/info.txt" || true

# GPUIO_STEPS picks what runs after the build (default "gpu host"):
#   gpu   GPU tests, GPU benchmarks, CAM pipelines (issue 3)
#   host  gpuio bench at full size, host destinations, cold cache (issue 2; "host-quick": CI-sized)
#   apps  stream store benchmark + the stream cache example in a memory cgroup (issue 5), 8-device sim scaling (6;
#         GPUIO_SKIP_SIM=1 leaves it out; GPUIO_CACHE_DATASET/_MEM/_TIMEOUT size the example)
#   gnn   GNN epoch benchmark, memory-constrained (issue 4)
#   demo  `gpuio demo` as the README runs it, from an empty directory, timed and bounded (issue 10)
#   hetero  RGAT on an IGBH-shaped graph (issue 15; GPUIO_HETERO_* size it)
# in_cgroup MEM CMD...: run CMD with its page cache limited by a cgroup v2 memory.max (BENCHMARKS.md).
in_cgroup() {
  local mem=$1 cg=/sys/fs/cgroup/gpuio-check-$$; shift
  grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || echo +memory > /sys/fs/cgroup/cgroup.subtree_control
  mkdir -p $cg && echo "$mem" > $cg/memory.max || { note "cgroup $mem: could not be made"; return 1; }
  (echo $BASHPID > $cg/cgroup.procs && exec "$@"); local rc=$?
  rmdir $cg 2>/dev/null; return $rc
}

# Issue 2: engine vs raw reference, host destinations, on the virtio disk (the checkout's file system).
if want host || want host-quick; then
  step "gpuio bench (issue 2: host destinations, uring and posix, cold cache)"
  size=(--size "${GPUIO_BENCH_SIZE:-4G}" --repeats "${GPUIO_BENCH_REPEATS:-3}" --seconds "${GPUIO_BENCH_SECONDS:-1.5}" --workload read ${GPUIO_BENCH_EXTRA:-})
  want host-quick && size=(--quick)
  timeout 420 python3 -c "from gpuio.cli import main; main()" bench "${size[@]}" --cold --json "$out/gpuio_bench.json" --plot "$out/gpuio_bench.png" \
    > "$out/gpuio_bench.txt" 2>&1 || { note "gpuio bench FAILED"; status=1; }
  tail -16 "$out/gpuio_bench.txt"
  python3 -m gpuio.bench.markdown "$out/gpuio_bench.json" >> "$summary" 2>&1 || true
fi

if want gpu; then
step "GPU tests"
# -s: each test prints its name as it starts and a hang's faulthandler dump (test_gpu.py's watchdog,
# TEST_GPU_TIMEOUT_S) reaches the log; the whole log goes to $OUT, its end to the console.
TEST_GPU_TIMEOUT_S=60 timeout 420 python3 -m pytest -v -s -p no:cacheprovider tests/python/test_gpu*.py \
  tests/python/test_examples_cam.py -rs > "$out/pytest.txt" 2>&1
grep -E "^\[test_gpu\]|PASSED|FAILED|SKIPPED|ERROR|Timeout|File \"|Thread|passed|failed" "$out/pytest.txt" | tail -60
grep -qE "[0-9]+ passed" "$out/pytest.txt" && ! grep -qE "[0-9]+ (failed|error)" "$out/pytest.txt" \
  && note "pytest GPU: $(tail -1 "$out/pytest.txt")" \
  || { note "pytest GPU FAILED: $(tail -1 "$out/pytest.txt")"; status=1; }
timeout 60 /tmp/test_device_api /tmp/device_api_test.bin 2>&1 | tail -3 | tee -a "$summary" || status=1

if [[ ${GPUIO_SKIP_GPU_BENCH:-0} != 1 ]]; then  # GPUIO_SKIP_GPU_BENCH=1: GPU tests only
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
fi  # GPU benchmarks

fi  # gpu

if want demo; then
  step "gpuio demo (issue 10): the README's main job from an empty directory, bounded"
  demo_dir=$(mktemp -d /tmp/gpuio-demo-XXXXXX)
  t0=$(date +%s.%N)
  (cd "$demo_dir" && timeout ${GPUIO_DEMO_TIMEOUT:-300} python3 -X faulthandler -c "from gpuio.cli import main; main()" demo ${GPUIO_DEMO_ARGS:-}) \
    > "$out/demo.txt" 2>&1
  rc=$?
  t=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
  tail -30 "$out/demo.txt"
  if ((rc)); then note "gpuio demo FAILED (rc=$rc$( ((rc == 124)) && echo ', timed out'), ${t} s)"; status=1
  else note "gpuio demo: ok in ${t} s (empty directory $demo_dir): $(grep -m1 -E '^gpuio [0-9.]+ s/epoch|x faster|identical' "$out/demo.txt")"; fi
  rm -rf "$demo_dir"
fi

if want apps; then
  step "streams (issue 5): stream vs raw sequential, cold; stream cache example under a 1.5 GiB cgroup"
  timeout 200 python3 benchmarks/streams_bench.py --bytes 4G --repeats 5 --dir "$repo" --json "$out/streams_bench.json" 2>&1 \
    | tee "$out/streams_bench.txt" | tail -12
  tail -6 "$out/streams_bench.txt" >> "$summary"
  rm -f "$repo"/streams-bench*.bin  # the disk is 64 GiB: leave room for the next steps
  sync; echo 3 > /proc/sys/vm/drop_caches
  mkdir -p "$repo/.check-work"
  in_cgroup ${GPUIO_CACHE_MEM:-1536M} timeout ${GPUIO_CACHE_TIMEOUT:-300} python3 examples/stream_cache.py --dataset ${GPUIO_CACHE_DATASET:-4G} --epochs 2 --dir "$repo/.check-work" 2>&1 \
    | tee "$out/stream_cache.txt" | tail -12
  tail -8 "$out/stream_cache.txt" >> "$summary"
  rm -rf "$repo/.check-work"
  if [[ ${GPUIO_SKIP_SIM:-0} != 1 ]]; then
    step "sim scaling (issue 6): 8 emulated devices vs 8 x one, <= 4 workers"
    timeout 120 python3 benchmarks/sim_scaling.py 2>&1 | tee "$out/sim_scaling.txt" | tail -12
    tail -6 "$out/sim_scaling.txt" >> "$summary"
  fi
fi

if want gnn; then
  step "GNN epoch (issue 4): memory-constrained, feature table >= 4 x GPU cache"
  df -h "$repo" | tail -1
  # GPUIO_GNN_ARGS sizes it (default: the script's own, an 8 GiB table); the cgroup and cold cache stay.
  # a seconds-long CUDA smoke run first: a path broken on the GPU fails here, before the table is written
  mkdir -p /tmp/gnn-tiny && timeout 90 python3 benchmarks/gnn_epoch.py --tiny --workdir /tmp/gnn-tiny --json "$out/gnn_epoch_tiny.json" \
    > "$out/gnn_epoch_tiny.txt" 2>&1 || { note "gnn_epoch --tiny FAILED"; tail -20 "$out/gnn_epoch_tiny.txt"; status=1; }
  timeout ${GPUIO_GNN_TIMEOUT:-420} python3 benchmarks/gnn_epoch.py --cgroup-mem ${GPUIO_GNN_MEM:-4G} --drop-caches --workdir "$repo" \
    ${GPUIO_GNN_ARGS:-} --json "$out/gnn_epoch.json" 2>&1 | tee "$out/gnn_epoch.txt" | tail -25
  tail -12 "$out/gnn_epoch.txt" >> "$summary"
fi

# Issue 15: RGAT on an IGBH-shaped graph (examples/rgat_igbh.py = `gpuio demo --hetero`; benchmarks/RESULTS_HETERO.md
# names the judged runs). GPUIO_HETERO_* size it:
#   _ROOT (dataset dir, default .check-work/igbh), _PAPERS (default 2000000), _GEN (generator options, the same in
#   every call: they decide reuse; default "--gen-device cuda"), _GEN_TIMEOUT (default 540), _SKIP_TINY=1 (no smoke),
#   _TINY_AT=end (the smoke after the other phases, only if >= 40 s are left), _ARGS (the run in the memory cgroup;
#   default "--backends gpuio,mmap"; empty: generate only), _MEM (cgroup, default 12G), _TIMEOUT (default 540),
#   _HOMO (arguments of benchmarks/belady_gnn.py, run after the job: the homogeneous Belady ratio; empty: not run),
#   _HOMO_TIMEOUT (default 90), _FREE_ARGS (a run outside the cgroup, e.g. "--backends gpuio,memory": losses and
#   accuracy against in-memory features), _FREE_TIMEOUT (default 300), _CLEAN=1 (delete the dataset after),
#   _NPROC (ranks of the cgroup run, a list: "1 2" runs it on one GPU, then on two with torchrun; with more than
#   one rank count, benchmarks/hetero_scaling.py prints N GPUs / 1 GPU from the runs' medians: "1 2 1 2 1 2"),
#   _OMP (OMP_NUM_THREADS of each rank of a multi-rank run; default the cores / ranks),
#   _RESERVE (seconds of the call kept for the phases after the cgroup run; default 75 with _HOMO + 45 with
#   _TINY_AT=end + 60 with _FREE_ARGS).
# With GPUIO_CALL_S every phase's timeout shrinks to what is left of the call (the cgroup run's to what is left less
# _RESERVE, generation's keeps 120 s for the run), and the run gets --budget (its timeout less 30 s) so its per-run
# caps shrink to fit; at its timeout it gets SIGTERM and still prints its report (judged lines of finished runs).
# Order: tiny CUDA smoke; generation (outside the cgroup, timed; reused when present); the cgroup run (page cache
# dropped first); the homogeneous Belady run; the free run; the smoke if _TINY_AT=end. The dataset stays on disk for
# the next call unless _CLEAN=1. Files: hetero.txt (generation + the run), hetero.json, hetero_homo.txt,
# hetero_tiny.txt, hetero_free.txt (the device tool returns at most 8 files).
if want hetero; then
  step "RGAT on an IGBH-shaped graph (issue 15), memory-constrained"
  hroot=${GPUIO_HETERO_ROOT:-$repo/.check-work/igbh}
  hgen="--papers ${GPUIO_HETERO_PAPERS:-2000000} ${GPUIO_HETERO_GEN---gen-device cuda}"
  hargs=${GPUIO_HETERO_ARGS---backends gpuio,mmap}
  homo=${GPUIO_HETERO_HOMO:-}
  tiny() {
    mkdir -p /tmp/hetero-tiny && timeout -k 5 "$1" python3 examples/rgat_igbh.py --root /tmp/hetero-tiny/d --papers 2000 \
      --features 64 --steps 5 --eval-nodes 256 --backends gpuio,memory --belady ${GPUIO_HETERO_TINY_ARGS:-} > "$out/hetero_tiny.txt" 2>&1 \
      || { note "rgat_igbh tiny FAILED"; tail -20 "$out/hetero_tiny.txt"; status=1; }
    grep -E "losses|^judged: (bytes|accuracy)" "$out/hetero_tiny.txt" | sed "s/^/[tiny] /" | tee -a "$summary"
  }
  tiny_end=0
  if [[ ${GPUIO_HETERO_SKIP_TINY:-0} != 1 ]]; then
    if [[ ${GPUIO_HETERO_TINY_AT:-start} == end ]]; then tiny_end=1; else tiny 150; fi
  fi
  free_args=${GPUIO_HETERO_FREE_ARGS:-}
  reserve=${GPUIO_HETERO_RESERVE:-$(( (${#homo} > 0 ? 75 : 0) + tiny_end * 45 + (${#free_args} > 0 ? 60 : 0) ))}
  mkdir -p "$(dirname "$hroot")"; df -h "$(dirname "$hroot")" | tail -1
  t0=$(date +%s)
  gen_to=$(within ${GPUIO_HETERO_GEN_TIMEOUT:-540} $(( reserve + 120 )))
  timeout -k 10 "$gen_to" python3 examples/rgat_igbh.py --root "$hroot" $hgen --generate-only 2>&1 \
    | tee /tmp/hetero_gen.txt | tail -3 || { note "hetero generation FAILED or timed out (${gen_to} s)"; status=1; }
  t1=$(date +%s); sync  # the generator's dirty pages reach the disk before anything is timed
  note "hetero dataset ($hgen): $(tail -1 /tmp/hetero_gen.txt) [$(( t1 - t0 )) s, sync $(( $(date +%s) - t1 )) s]"
  cp /tmp/hetero_gen.txt "$out/hetero.txt"
  du -sh "$hroot" 2>/dev/null | tee -a "$summary"
  [[ -f $hroot/meta.json ]] || { note "hetero dataset incomplete: no run"; hargs=""; }
  # the disk's own 4 KiB random-read rate on the paper features (iobench, O_DIRECT, 2 threads x QD128, 4 s): the
  # reference a disk-bound run is judged against (--disk-mbs); page cache irrelevant (O_DIRECT)
  disk=()
  if [[ -n $hargs && -x /tmp/iobench && -f $hroot/paper/node_feat.npy ]]; then
    io=$(/tmp/iobench "$hroot/paper/node_feat.npy" 4096 128 2 4 1 0 0 1 2>&1 | tail -1)
    mbs=$(sed -n 's/.*: \([0-9]*\) IOPS.*/\1/p' <<< "$io" | awk '{printf "%.1f", $1 * 4096 / 1e6}')
    note "disk reference: $io"
    [[ -n $mbs ]] && disk=(--disk-mbs "$mbs")
  fi
  # GPUIO_HETERO_NPROC: ranks per run, e.g. "1 2" runs the same job on 1 then 2 GPUs (torchrun, NCCL) in the cgroup
  rm -rf /tmp/hetero-runs && mkdir -p /tmp/hetero-runs; k=0
  for np in ${GPUIO_HETERO_NPROC:-1}; do
    [[ -n $hargs ]] || break
    k=$((k + 1))
    sfx=$( ((np > 1)) && echo "-np$np" )
    launch=(python3 examples/rgat_igbh.py)
    # torchrun sets OMP_NUM_THREADS=1 per rank unless it is set: give each rank its share of the cores instead
    # (the H200 x2 run at 1 thread per rank spent 5.8 x as long loading features as the 1-rank run)
    # (GPUIO_HETERO_OMP overrides it: fewer intra-op threads per rank leave the cores to the samplers and launches)
    ((np > 1)) && launch=(env OMP_NUM_THREADS=${GPUIO_HETERO_OMP:-$(( $(nproc) / np ))} python3 -m torch.distributed.run
                          --standalone --nproc_per_node "$np" examples/rgat_igbh.py)
    sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    job_to=$(within ${GPUIO_HETERO_TIMEOUT:-540} "$reserve")
    budget=()
    [[ -n ${GPUIO_CALL_S:-} ]] && budget=(--budget $(( job_to > 90 ? job_to - 30 : job_to * 2 / 3 )))
    note "hetero run ($np GPU): timeout ${job_to} s ${budget[*]}; $(left) s of the call left"
    in_cgroup ${GPUIO_HETERO_MEM:-12G} timeout -k 15 "$job_to" "${launch[@]}" --root "$hroot" \
      $hgen $hargs "${budget[@]}" "${disk[@]}" --json "$out/hetero$sfx.json" 2>&1 | tee -a "$out/hetero$sfx.txt" | tail -60
    grep -E "^memory given|^done |capped by|rank\(s\)|^judged|stopped by" \
      "$out/hetero$sfx.txt" | sed "s/^/[$np GPU] /" >> "$summary"
    cp "$out/hetero$sfx.json" "/tmp/hetero-runs/$k-np$np.json" 2>/dev/null
  done
  # several rank counts (e.g. "1 2 1 2 1 2"): N GPUs / 1 GPU from the medians of the runs ($out keeps the last of each)
  if (( $(tr ' ' '\n' <<< "${GPUIO_HETERO_NPROC:-1}" | sort -u | grep -c .) > 1 )); then
    # (into the summary, not a file of its own: the device tool returns at most 8 files)
    python3 benchmarks/hetero_scaling.py /tmp/hetero-runs/*.json 2>&1 | sed "s/^/[scaling] /" | tee -a "$summary"
  fi
  if [[ -n $homo ]]; then  # bytes vs MIN do not depend on the page cache (the tables read O_DIRECT): no cgroup
    homo_to=$(within ${GPUIO_HETERO_HOMO_TIMEOUT:-90} $(( tiny_end * 45 + (${#free_args} > 0 ? 60 : 0) )))
    timeout -k 5 "$homo_to" python3 benchmarks/belady_gnn.py $homo --workdir "$(dirname "$hroot")" \
      --json /tmp/belady_gnn.json > "$out/hetero_homo.txt" 2>&1 || { note "belady_gnn FAILED or timed out (${homo_to} s)"; status=1; }
    tail -4 "$out/hetero_homo.txt"
    grep -E "^judged" "$out/hetero_homo.txt" >> "$summary"
    rm -f "$(dirname "$hroot")/gpuio-belady-features.npy"
  fi
  if [[ -n $free_args ]]; then
    timeout -k 10 "$(within ${GPUIO_HETERO_FREE_TIMEOUT:-300} $(( tiny_end * 45 )))" python3 examples/rgat_igbh.py \
      --root "$hroot" $hgen $free_args --json /tmp/hetero_free.json 2>&1 | tee "$out/hetero_free.txt" | tail -25
    grep -E "losses|test accuracy|rank\(s\)|^judged" "$out/hetero_free.txt" >> "$summary"
  fi
  if ((tiny_end)); then
    if (( $(left) >= 40 )); then tiny "$(within 150 3)"; else note "tiny smoke skipped: $(left) s of the call left"; fi
  fi
  [[ ${GPUIO_HETERO_CLEAN:-0} == 1 ]] && rm -rf "$hroot"
fi

step "summary"
cat "$summary"
[[ -f "$out/gpu_bench.txt" ]] && grep "^|" "$out/gpu_bench.txt"
exit $status
