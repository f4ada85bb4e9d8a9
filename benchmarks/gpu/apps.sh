# The applications' judged runs (sourced by scripts/gpu.sh), each suite one call of < 9.5 minutes:
#   apps    CUDA smoke (sort, vecadd); GPT-2 medium checkpoints + breakdown; sort of 4 Gi int32 keys in a 2 GiB budget
#           (2 Gi when the disk lacks 50 GiB); resize large; vector add large with its raw device rates; GEMM 16384^2
#           bf16 + fp32 beside pread+copy and KvikIO (last: it gets what the budget leaves)
#   graph   Kronecker 2^26 graph; BFS in a memory cgroup (gpuio-array, pread+copy, memmap+copy); CC, SSSP
# The disk is 64 GiB: every step that writes first checks the free space it needs (need_gib) and prints one
# "[step] SKIPPED: needs N GiB free ..." line instead of failing; vector add (3 x 8 GB) runs after sort has removed
# its files. A step where the graph folder is in the way removes the graph first (graph-build rebuilds it, ~1 min).
# Each ends with one table of the judged ratios against their bars (benchmarks/apps_summary.py).
# Environment: GPUIO_APPS_STEPS (the steps to run, overriding the suite's list: preflight smoke gpt2 sort resize vecadd
# gemm | preflight graph-build bfs cc sssp), GPUIO_APPS_DIR (work folder, default /var/tmp/gpuio-apps),
# GPUIO_APPS_SIZE (default large), GPUIO_APPS_DEVICE (default cuda), GPUIO_APPS_SORT_KEYS (default: 4G, or 2G when the
# disk is short), GPUIO_APPS_SORT_ARGS (default --no-threads: the thread-pool baseline, not judged, would cost ~40 s;
# "" runs it), GPUIO_APPS_SCALE (default 26), GPUIO_APPS_GRAPH_MEM (cgroup memory.max of the graph runs, default 6G),
# GPUIO_APPS_GRAPH_ARGS, GPUIO_APPS_COLD="" (no cache drops: CPU checks only), GPUIO_APPS_KEEP_GRAPH=0 (delete the
# graph at the end), GPUIO_APPS_SSSP_CAP (seconds, default 260). The GEMM's KvikIO baseline needs the carried
# wheels (.whl/); without them its row says "kvikio skipped" and why.

suite apps build "the applications at the judged sizes: GPT-2 checkpoints, sort 4 Gi keys, resize, vector add 1e9, \
GEMM 16384^2 beside pread+copy and KvikIO (GPUIO_APPS_*: see benchmarks/gpu/apps.sh)"
suite_apps() { apps_call "preflight smoke gpt2 sort resize vecadd gemm"; }
suite graph build "graph analytics on device arrays at 2^26 vertices: BFS / CC / SSSP beside pread+copy and \
memmap+copy, in a memory cgroup, cold (GPUIO_APPS_*: see benchmarks/gpu/apps.sh)"
suite_graph() { apps_call "preflight graph-build bfs cc sssp"; }

apps_call() {
  local steps=" ${GPUIO_APPS_STEPS:-$1} " work size=${GPUIO_APPS_SIZE:-large}
  work=$(on "${GPUIO_APPS_DIR:-/var/tmp/gpuio-apps}")
  local dev=${GPUIO_APPS_DEVICE:-cuda} cold=${GPUIO_APPS_COLD---cold} scale=${GPUIO_APPS_SCALE:-26} status=0
  local gdir=$work/graph-s$scale apps=("$py" "$repo/benchmarks/apps_bench.py")
  want() { [[ $steps == *" $1 "* ]]; }
  run mkdir -p "$work" "$OUT/$suite"
  if want preflight; then bounded preflight 60 "$py" benchmarks/gpu_preflight.py --work "$work" || status=1; fi
  if want smoke; then  # seconds: the CUDA paths of the big runs (sort and vecadd made and checked on the GPU)
    run mkdir -p "$work/smoke"
    GPUIO_TAIL=4 indir "$work/smoke" bounded smoke 90 "${apps[@]}" --size tiny --device "$dev" --apps sort --apps vecadd \
      --store "$work/smoke" --json "$OUT/$suite/smoke.json" || status=1
    run rm -rf "$work/smoke"
  fi
  if want gpt2 && room gpt2; then  # save/load vs raw device and torch; safetensors loads gpuio's file; the job's breakdown
    indir "$work" bounded gpt2 200 "${apps[@]}" --size "$size" --device "$dev" $cold --store "$work" --apps gpt2 \
      --json "$OUT/$suite/apps-gpt2.json" || status=1
    run rm -f "$work"/gpuio-apps-gpt2*
  fi
  if want sort; then apps_sort || status=1; fi
  if want resize && room resize; then
    indir "$work" bounded resize 150 "${apps[@]}" --size "$size" --device "$dev" $cold --store "$work" --apps resize \
      --json "$OUT/$suite/apps-resize.json" || status=1
    run rm -f "$work"/gpuio-apps-resize*
  fi
  if want vecadd && room vecadd; then  # 1e9 float64 in 1 MiB batches, with the raw device's read and write rates
    GPUIO_TAIL=8 indir "$work" bounded vecadd 240 "${apps[@]}" --size "$size" --device "$dev" $cold --store "$work" \
      --apps vecadd --json "$OUT/$suite/apps-vecadd.json" || status=1
    run rm -f "$work"/gpuio-apps-vecadd*
  fi
  if want gemm && room gemm; then apps_gemm || status=1; fi
  if want graph-build && room graph-build; then  # outside the cgroup (the build holds the edge list in GPU memory)
    GPUIO_TAIL=4 bounded graph-build 300 "$py" benchmarks/graph_bench.py --scale "$scale" --data-dir "$gdir" --build-only \
      ${GPUIO_APPS_GRAPH_ARGS:-} || status=1
  fi
  if want bfs && have_graph bfs; then GPUIO_TAIL=12 graph_run bfs 200 bfs gpuio-array,pread+copy,memmap+copy || status=1; fi
  if want cc && have_graph cc; then graph_run cc 150 cc gpuio-array,pread+copy || status=1; fi
  if want sssp && have_graph sssp; then
    GPUIO_TAIL=12 graph_run sssp "${GPUIO_APPS_SSSP_CAP:-260}" sssp gpuio-array,pread+copy || status=1
  fi
  [[ ${GPUIO_APPS_KEEP_GRAPH:-1} == 1 ]] || run rm -rf "$gdir"
  ((GPU_DRY)) && { echo "+ $(q "$py" benchmarks/apps_summary.py "$OUT/$suite")"; return 0; }
  "$py" benchmarks/apps_summary.py "$OUT/$suite" | tee "$OUT/$suite/apps_summary.txt"
  return $status
}

free_gib() { ((GPU_DRY)) && { echo 999; return; }; echo $(( $(df -B1 --output=avail "$work" | tail -1 | tr -d ' ') >> 30 )); }
# need_gib STEP: GiB of free space STEP writes at this size and scale (its files, rounded up, plus 1 GiB)
need_gib() {
  local big=0; [[ $size == large || $size == medium ]] && big=1
  case $1 in
    gpt2) ((big)) && echo 17 || echo 9 ;;       # gpuio, torch and safetensors files + the raw scratch: 4 x 4.26 GB
    resize) ((big)) && echo 5 || echo 2 ;;      # 3 GiB of decoded images + 0.75 GiB resized
    vecadd) [[ $size == large ]] && echo 24 || echo 7 ;;  # a, b, c: 3 x 8 GB at 1e9 float64
    gemm) [[ $size == large ]] && echo 4 || echo 2 ;;     # A, B, C of the fp32 run: 3 x 1 GiB at 16384^2
    graph-build)  # 2^scale x 16 edges, both directions, col + weight (4 + 4 bytes); none when it is reused
      [[ -f $gdir/graph.json ]] && echo 1 || echo $(( (1 << scale) * 16 * 2 * 8 / (1 << 30) + 2 )) ;;
    *) echo 1 ;;
  esac
}
# room STEP: whether STEP has the free space it needs; when not, and a graph folder other than STEP's own is in the
# way, it is removed (graph-build rebuilds it); else one SKIPPED line (and a table row) and false
room() {
  local need free; need=$(need_gib "$1"); free=$(free_gib)
  if (( free < need )) && [[ $1 != graph-build && -d $gdir ]]; then
    echo "[$1] needs $need GiB free on $work, $free GiB free: removing the graph folder $gdir"
    rm -rf "$gdir"; free=$(free_gib)
  fi
  if (( free < need )); then note "[$1] SKIPPED: needs $need GiB free on $work, $free GiB free"; row "$1" skipped-disk 0 0; return 1; fi
  ((GPU_DRY)) || echo "[$1] $free GiB free on $work (needs $need)"
}
have_graph() {  # have_graph STEP: the graph folder is there (else one SKIPPED line)
  ((GPU_DRY)) || [[ -f $gdir/graph.json ]] && return 0
  note "[$1] SKIPPED: no graph in $gdir (graph-build did not run or did not finish)"; row "$1" skipped-no-graph 0 0; return 1
}
# graph_run NAME CAP ALGOS SOURCES: graph_bench in the memory cgroup, cold, JSON to $OUT/<suite>/graph-NAME.json
graph_run() {
  in_cgroup "${GPUIO_APPS_GRAPH_MEM:-6G}" bounded "$1" "$2" "$py" "$repo/benchmarks/graph_bench.py" --scale "$scale" \
    --data-dir "$gdir" --algos "$3" --sources "$4" $cold --json "$OUT/$suite/graph-$1.json" ${GPUIO_APPS_GRAPH_ARGS:-}
}

apps_sort() {
  local keys=${GPUIO_APPS_SORT_KEYS:-} rc=0
  if [[ -z $keys && $size == large ]]; then  # input, runs and output: 3 x 16 GiB at 4 Gi keys, and 2 GiB to spare
    (( $(free_gib) < 50 )) && [[ -d $gdir ]] && { echo "sort: removing the graph folder $gdir for 4 Gi keys"; rm -rf "$gdir"; }
    keys=4G; (( $(free_gib) < 50 )) && keys=2G
  fi
  if [[ $keys == 2G ]] && (( $(free_gib) < 26 )); then
    note "[sort] SKIPPED: needs 26 GiB free on $work for 2 Gi keys, $(free_gib) GiB free"; row sort skipped-disk 0 0
  else
    GPUIO_TAIL=16 indir "$work" bounded sort 420 "$py" -m gpuio_apps.papers.sort --size "$size" --device "$dev" $cold \
      --store "$work/gpuio-apps-sort.bin" ${keys:+--keys $keys} ${GPUIO_APPS_SORT_ARGS---no-threads} \
      --json "$OUT/$suite/apps-sort.json" || rc=1
  fi
  run rm -f "$work/gpuio-apps-sort.bin"
  return $rc
}

# 16384^2 tiles, bf16 then fp32: gpuio vs pread+copy vs KvikIO (compat mode; /tmp/whl-site). KvikIO 26.10 in compat
# mode aborted the process with a corrupted heap after the bf16 pass (2 x H200): the gpuio and pread rows are then
# run again without it, the row saying why.
apps_gemm() {
  local rc=0
  GPUIO_TAIL=12 indir "$work" bounded gemm 240 "${apps[@]}" --size "$size" --device "$dev" $cold --store "$work" \
    --apps gemm --json "$OUT/$suite/apps-gemm.json" || rc=$?
  run rm -f "$work"/gpuio-apps-gemm*
  if ((rc == 134 || rc == 139)) && [[ -d /tmp/whl-site/kvikio ]]; then
    note "[gemm] the process aborted (rc $rc) with KvikIO in it: again without KvikIO (GPUIO_KVIKIO=off)"
    rc=0
    GPUIO_KVIKIO=off GPUIO_TAIL=12 indir "$work" bounded gemm-no-kvikio 200 "${apps[@]}" --size "$size" --device "$dev" \
      $cold --store "$work" --apps gemm --json "$OUT/$suite/apps-gemm.json" || rc=$?
    run rm -f "$work"/gpuio-apps-gemm*
  fi
  return $rc
}
