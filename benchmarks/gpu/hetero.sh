# The hetero suite of scripts/gpu.sh (sourced): RGAT on an IGBH-shaped graph (examples/rgat_igbh.py =
# `gpuio demo --hetero`), memory-constrained; the judged runs and their settings: docs/archive/results/RESULTS_HETERO.md.
# GPUIO_HETERO_* size it:
#   _ROOT (dataset dir, default .check-work/igbh), _PAPERS (default 2000000), _GEN (generator options, the same in
#   every call: they decide reuse; default "--gen-device cuda"), _GEN_TIMEOUT (default 540), _SKIP_TINY=1 (no smoke),
#   _TINY_AT=end (the smoke after the other phases, only if >= 40 s are left), _TINY_ARGS, _ARGS (the run in the
#   memory cgroup; default "--backends gpuio,mmap"; empty: generate only), _MEM (cgroup, default 12G), _TIMEOUT
#   (default 540), _HOMO (arguments of benchmarks/belady_gnn.py, run after the job: the homogeneous Belady ratio;
#   empty: not run), _HOMO_TIMEOUT (default 90), _FREE_ARGS (a run outside the cgroup, e.g. "--backends
#   gpuio,memory": losses and accuracy against in-memory features), _FREE_TIMEOUT (default 300), _CLEAN=1 (delete
#   the dataset after), _NPROC (ranks of the cgroup run, a list: "1 2" runs it on one GPU, then on two with torchrun;
#   with more than one rank count, benchmarks/hetero_scaling.py prints N GPUs / 1 GPU from the runs' medians:
#   "1 2 1 2 1 2"), _OMP (OMP_NUM_THREADS of each rank of a multi-rank run; default the cores / ranks), _RESERVE
#   (seconds of the call kept for the phases after the cgroup run; default 75 with _HOMO + 45 with _TINY_AT=end +
#   60 with _FREE_ARGS).
# Every run passes HETERO_JUDGED first (options given after it, as in _ARGS, win): the judged run's settings, since
# `gpuio demo --hetero`'s own defaults are the demo's (a smaller epoch, a memory cgroup of its own, deterministic
# kernels, no judged lines; the demo-hetero suite runs those).
# Every phase's timeout shrinks to what is left of the call (GPUIO_CALL_S): the cgroup run's to what is left less
# _RESERVE, generation's keeps 120 s for the run, and the run gets --budget (its timeout less 30 s) so its per-run
# caps shrink to fit; at its timeout it gets SIGTERM and still prints its report (judged lines of finished runs).
# Order: tiny CUDA smoke; generation (outside the cgroup, timed; reused when present); the cgroup run (page cache
# dropped first); the homogeneous Belady run; the free run; the smoke if _TINY_AT=end. The dataset stays on disk for
# the next call unless _CLEAN=1.

HETERO_JUDGED="--judge --no-deterministic --memory-fraction 0 --steps 100 --batch-size 1024 --eval-nodes 20000 --time-cap 0"

suite hetero build "RGAT on an IGBH-shaped graph, memory-constrained (GPUIO_HETERO_*: see benchmarks/gpu/hetero.sh)"
suite_hetero() {
  local hroot status=0
  hroot=$(on "${GPUIO_HETERO_ROOT:-$repo/.check-work/igbh}")
  local hgen="--papers ${GPUIO_HETERO_PAPERS:-2000000} ${GPUIO_HETERO_GEN---gen-device cuda}"
  local hargs=${GPUIO_HETERO_ARGS---backends gpuio,mmap} homo=${GPUIO_HETERO_HOMO:-} free_args=${GPUIO_HETERO_FREE_ARGS:-}
  local tiny_end=0
  if [[ ${GPUIO_HETERO_SKIP_TINY:-0} != 1 ]]; then
    if [[ ${GPUIO_HETERO_TINY_AT:-start} == end ]]; then tiny_end=1; else hetero_tiny 150 || status=1; fi
  fi
  local reserve=${GPUIO_HETERO_RESERVE:-$(( (${#homo} > 0 ? 75 : 0) + tiny_end * 45 + (${#free_args} > 0 ? 60 : 0) ))}
  run mkdir -p "$(dirname "$hroot")"
  local t0 t1 gen_to
  t0=$(date +%s)
  gen_to=$(within "${GPUIO_HETERO_GEN_TIMEOUT:-540}" $(( reserve + 120 )))
  BOUNDED_RESERVE=0 BOUNDED_TERM=1 GPUIO_TAIL=3 bounded generate "$gen_to" "$py" examples/rgat_igbh.py --root "$hroot" $hgen --generate-only \
    || { note "hetero generation FAILED or timed out (${gen_to} s)"; status=1; }
  t1=$(date +%s); run sync  # the generator's dirty pages reach the disk before anything is timed
  ((GPU_DRY)) || note "hetero dataset ($hgen): $(tail -1 "$(log_of generate)") [$(( t1 - t0 )) s, sync $(( $(date +%s) - t1 )) s]; $(du -sh "$hroot" 2>/dev/null | cut -f1)"
  ((GPU_DRY)) || [[ -f $hroot/meta.json ]] || { note "hetero dataset incomplete: no run"; hargs=""; }
  # the disk's own 4 KiB random-read rate on the paper features (iobench, O_DIRECT, 2 threads x QD128, 4 s): the
  # reference a disk-bound run is judged against (--disk-mbs); page cache irrelevant (O_DIRECT)
  local disk=()
  if [[ -n $hargs && -n $iobench ]]; then
    GPUIO_TAIL=1 bounded disk-reference 30 "$iobench" "$hroot/paper/node_feat.npy" 4096 128 2 4 1 0 0 1
    if ((!GPU_DRY)); then
      local io mbs; io=$(tail -1 "$(log_of disk-reference)")
      mbs=$(sed -n 's/.*: \([0-9]*\) IOPS.*/\1/p' <<< "$io" | awk '{printf "%.1f", $1 * 4096 / 1e6}')
      note "disk reference: $io"
      [[ -n $mbs ]] && disk=(--disk-mbs "$mbs")
    fi
  fi
  run rm -rf /tmp/hetero-runs; run mkdir -p /tmp/hetero-runs
  local k=0 np sfx launch job_to budget
  for np in ${GPUIO_HETERO_NPROC:-1}; do
    [[ -n $hargs ]] || break
    k=$((k + 1)); sfx=""; ((np > 1)) && sfx="-np$np"
    launch=("$py" examples/rgat_igbh.py)
    # torchrun sets OMP_NUM_THREADS=1 per rank unless it is set: give each rank its share of the cores instead
    # (the H200 x2 run at 1 thread per rank spent 5.8 x as long loading features as the 1-rank run)
    ((np > 1)) && launch=(env OMP_NUM_THREADS="${GPUIO_HETERO_OMP:-$(( $(nproc) / np ))}" "$py" -m torch.distributed.run
                          --standalone --nproc_per_node "$np" examples/rgat_igbh.py)
    drop_caches
    job_to=$(within "${GPUIO_HETERO_TIMEOUT:-540}" "$reserve")
    budget=(); ((call_s > 0)) && budget=(--budget $(( job_to > 90 ? job_to - 30 : job_to * 2 / 3 )))
    note "hetero run ($np GPU): timeout ${job_to} s ${budget[*]}; $(left) s of the call left"
    GPUIO_TAIL=60 BOUNDED_RESERVE=0 BOUNDED_TERM=1 in_cgroup "${GPUIO_HETERO_MEM:-12G}" bounded "run$sfx-$k" "$job_to" "${launch[@]}" \
      --root "$hroot" $hgen $HETERO_JUDGED $hargs "${budget[@]}" "${disk[@]}" --json "$OUT/$suite/hetero$sfx-$k.json" || status=1
    ((GPU_DRY)) || grep -E "^memory given|^done |capped by|rank\(s\)|^judged|stopped by" "$(log_of "run$sfx-$k")" \
      | sed "s/^/[$np GPU] /" >> "$summary"
    run cp "$OUT/$suite/hetero$sfx-$k.json" "/tmp/hetero-runs/$k-np$np.json"
  done
  # several rank counts (e.g. "1 2 1 2 1 2"): N GPUs / 1 GPU from the medians of the runs
  if (( $(tr ' ' '\n' <<< "${GPUIO_HETERO_NPROC:-1}" | sort -u | grep -c .) > 1 )); then
    bounded scaling 60 bash -c "$(q "$py" benchmarks/hetero_scaling.py) /tmp/hetero-runs/*.json"
    say scaling 20
  fi
  if [[ -n $homo ]]; then  # bytes vs MIN do not depend on the page cache (the tables read O_DIRECT): no cgroup
    BOUNDED_RESERVE=0 GPUIO_TAIL=4 bounded belady-homogeneous "$(within "${GPUIO_HETERO_HOMO_TIMEOUT:-90}" \
      $(( tiny_end * 45 + (${#free_args} > 0 ? 60 : 0) )))" "$py" benchmarks/belady_gnn.py $homo \
      --workdir "$(dirname "$hroot")" --json "$OUT/$suite/belady_gnn.json" || { note "belady_gnn FAILED or timed out"; status=1; }
    ((GPU_DRY)) || grep -E "^judged" "$(log_of belady-homogeneous)" >> "$summary"
    run rm -f "$(dirname "$hroot")/gpuio-belady-features.npy"
  fi
  if [[ -n $free_args ]]; then
    BOUNDED_RESERVE=0 GPUIO_TAIL=25 bounded free "$(within "${GPUIO_HETERO_FREE_TIMEOUT:-300}" $(( tiny_end * 45 )))" \
      "$py" examples/rgat_igbh.py --root "$hroot" $hgen $HETERO_JUDGED $free_args --json "$OUT/$suite/hetero_free.json" || status=1
    ((GPU_DRY)) || grep -E "losses|test accuracy|rank\(s\)|^judged" "$(log_of free)" >> "$summary"
  fi
  if ((tiny_end)); then
    if (( $(left) >= 40 )); then hetero_tiny "$(within 150 3)" || status=1; else note "tiny smoke skipped: $(left) s of the call left"; fi
  fi
  [[ ${GPUIO_HETERO_CLEAN:-0} == 1 ]] && run rm -rf "$hroot"
  return $status
}

# hetero_tiny LIMIT: 2 000 papers on CUDA, gpuio vs in-memory features (same losses), Belady's ratio
hetero_tiny() {
  local d; d=$(on /tmp/hetero-tiny)
  run mkdir -p "$d"
  BOUNDED_RESERVE=0 bounded tiny "$1" "$py" examples/rgat_igbh.py --root "$d/d" $HETERO_JUDGED --papers 2000 \
    --features 64 \
    --steps 5 --eval-nodes 256 --backends gpuio,memory --belady ${GPUIO_HETERO_TINY_ARGS:-} \
    || { note "rgat_igbh tiny FAILED"; return 1; }
  ((GPU_DRY)) || grep -E "losses|^judged: (bytes|accuracy)" "$(log_of tiny)" | sed "s/^/[tiny] /" | tee -a "$summary"
}
