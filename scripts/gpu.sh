#!/usr/bin/env bash
# The GPU machine's one runner: build once (a warm machine's build is reused), run the named suites, print one table.
#   bash scripts/gpu.sh [--dry-run] SUITE...        e.g. GPUIO_DATA_GIB=2 bash scripts/gpu.sh check demo
#   bash scripts/gpu.sh --list                      the suites and what each runs
# --dry-run prints the commands it would run (CI checks that every suite resolves). Details land in $OUT (default
# ./gpu-out): summary.txt (the notes and the table) and, when there are more than 8 files, details.tgz (every step's
# log and JSON, by suite: the device tool brings back 8 files). The suites live in benchmarks/gpu/*.sh; the build
# prologue, the step limits and the memory cgroup in benchmarks/gpu/lib.sh.
# Carried inputs (git-ignored, named in the device tool's `carry`): .carry/ (the liburing2 and liburing-dev .debs:
# the GPU machine has no liburing-dev; iobench.c, the raw-device reference tool of ../shared/tools; ceph/ for the
# ceph suite) and .whl/ (KvikIO wheels for the kvikio peer; safetensors, fastsafetensors, runai-model-streamer and
# humanize for the weights suites). Environment: benchmarks/gpu/lib.sh's header
# (GPUIO_CALL_S, GPUIO_BUILD, GPUIO_PYTHON, and GPUIO_DEVICE: disk, fast -- a RAM-backed loop device with ext4 the
# suite makes and removes -- or both, each suite run on each, the device named in every row) and each suite's own
# (--list).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # the machines keep NVLink multicast off (KINDS.md): keep it so in every child
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
repo=$(pwd)
GPU_DRY=0
declare -A SUITE_NEEDS SUITE_DOC
SUITE_ORDER=()
# suite NAME NEEDS DOC: register suite_<NAME> (dashes as underscores); NEEDS is "build" (the prologue first) or "none"
suite() { SUITE_NEEDS[$1]=$2; SUITE_DOC[$1]=$3; SUITE_ORDER+=("$1"); }
usage() {
  echo "usage: bash scripts/gpu.sh [--dry-run] SUITE...   (--list: the suites)"
  echo "suites: ${SUITE_ORDER[*]}"
  echo "GPUIO_DEVICE=disk|fast|both: the suites' data on the disk, on a RAM-backed loop device with ext4, or each in turn"
}

OUT=$(realpath -m "${OUT:-$repo/gpu-out}")
source benchmarks/gpu/lib.sh
for f in benchmarks/gpu/core.sh benchmarks/gpu/engine.sh benchmarks/gpu/hetero.sh benchmarks/gpu/apps.sh \
         benchmarks/gpu/ceph.sh benchmarks/gpu/weights.sh benchmarks/gpu/workers.sh; do
  source "$f"
done

chosen=()
for a in "$@"; do
  case $a in
    -n|--dry-run) GPU_DRY=1 ;;
    --list) for s in "${SUITE_ORDER[@]}"; do printf '%-13s %s\n' "$s" "${SUITE_DOC[$s]}" | fold -s -w 118 | sed '2,$s/^/              /'; done; exit 0 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "gpu.sh: error: unknown option '$a'" >&2; usage >&2; exit 2 ;;
    *) [[ -n ${SUITE_NEEDS[$a]:-} ]] || { echo "gpu.sh: error: unknown suite '$a' (--list shows them)" >&2; exit 2; }
       chosen+=("$a") ;;
  esac
done
((${#chosen[@]})) || { usage >&2; exit 2; }
# settings of the scripts gpu.sh replaced: refused, so a habit does not silently run something else
for v in GPUIO_STEPS GPUIO_APPS_BUDGET_S GPUIO_APPS_SKIP_BUILD GPUIO_APPS_NO_CGROUP; do
  [[ -z ${!v+x} ]] && continue
  case $v in
    GPUIO_STEPS) hint="name the suites instead: bash scripts/gpu.sh ${GPUIO_STEPS//gpu/check}" ;;
    GPUIO_APPS_BUDGET_S) hint="GPUIO_CALL_S bounds the whole call" ;;
    GPUIO_APPS_SKIP_BUILD) hint="GPUIO_BUILD=none" ;;
    *) hint="GPUIO_NO_CGROUP=1" ;;
  esac
  echo "gpu.sh: error: $v='${!v}' belongs to the old scripts: $hint (docs/archive/results/README.md)" >&2; exit 2
done

[[ ${GPUIO_CALL_S:-570} =~ ^[0-9]+$ ]] \
  || { echo "gpu.sh: error: GPUIO_CALL_S='$GPUIO_CALL_S': not a whole number of seconds (0: no deadline)" >&2; exit 2; }
[[ ${GPUIO_BUILD:-cuda} =~ ^(cuda|cpu|none)$ ]] \
  || { echo "gpu.sh: error: GPUIO_BUILD='$GPUIO_BUILD': not one of cuda, cpu, none" >&2; exit 2; }
devices=()
GPUIO_DEVICE=${GPUIO_DEVICE:-disk}
for d in ${GPUIO_DEVICE//,/ }; do
  case $d in
    disk|fast) [[ " ${devices[*]} " == *" $d "* ]] || devices+=("$d") ;;
    both) devices+=(disk fast) ;;
    *) echo "gpu.sh: error: GPUIO_DEVICE='$GPUIO_DEVICE': '$d' is not one of disk, fast, both" >&2; exit 2 ;;
  esac
done
((${#devices[@]})) || devices=(disk)
[[ " ${devices[*]} " == *" fast "* ]] && rates_default=1
# a fast device made is removed however the call ends (a signal: the trap, then exit)
trap '((GPU_DRY)) || fast_down' EXIT
suite_pid=""
# a signal: the suite's shell and its running step (a session of its own) stopped, by their ids, then the EXIT trap
stop_suite() {
  [[ -n $suite_pid ]] && kill "$suite_pid" 2>/dev/null
  local p; p=$(cat "$OUT/.step.pid" 2>/dev/null) && [[ $p =~ ^[0-9]+$ ]] && kill -TERM -- "-$p" 2>/dev/null
  rm -f "$OUT/.step.pid"; sleep 1
}
trap 'stop_suite; exit 143' TERM HUP INT

# the final table: the notes, then one row per step of every suite, then the tables the suites printed
table() {
  echo; echo "=== summary ==="
  cat "$summary" 2>/dev/null
  echo "devices: disk = $disk_label${fast_label:+; fast = $fast_label}"
  echo; echo "| suite | device | step | result | s | limit |"; echo "|---|---|---|---|---:|---:|"
  local s d name rc secs lim
  for s in prologue:disk "${ran[@]}"; do
    d=${s#*:}; s=${s%%:*}
    [[ -f $OUT/$(dir_of "$d" "$s")/steps.tsv ]] || continue
    while IFS=$'\t' read -r name rc secs lim; do
      case $rc in 0) rc=ok ;; 124|137) rc="CUT at its limit" ;; skipped*) ;; *) rc="FAILED (rc $rc)" ;; esac
      echo "| $s | $([[ $s == prologue ]] && echo - || echo "$d") | $name | $rc | $secs | $lim |"
    done < "$OUT/$(dir_of "$d" "$s")/steps.tsv"
  done
  rates_table
  echo; echo "suites: ${results[*]}"
  for d in check check-fast; do [[ -f $OUT/$d/gpu-bench.txt ]] && { echo; echo "[$d]"; grep "^|" "$OUT/$d/gpu-bench.txt"; }; done
  for s in apps graph apps-fast graph-fast; do [[ -f $OUT/$s/apps_summary.txt ]] && { echo; echo "[$s]"; cat "$OUT/$s/apps_summary.txt"; }; done
  return 0
}

# more than 8 files under $OUT (the device tool brings back 8): all but summary.txt into details.tgz
pack() {
  [[ ${GPUIO_PACK:-1} == 1 ]] || return 0
  local n; n=$(find "$OUT" -type f ! -name summary.txt | wc -l)
  (( n > 7 )) || return 0
  (cd "$OUT" && find . -mindepth 1 -maxdepth 1 ! -name summary.txt ! -name details.tgz -print0 \
    | tar -czf details.tgz --null -T - --remove-files) && echo "$n files of details in $OUT/details.tgz"
}

status=0 results=() ran=()
disk_label=$(python3 "$repo/python/gpuio_apps/bench/fastdev.py" storage "$repo" 2>/dev/null || echo "the disk under $repo")
fast_label=""
((GPU_DRY)) || { mkdir -p "$OUT" && : > "$summary"; }
need_build=0
for s in "${chosen[@]}"; do [[ ${SUITE_NEEDS[$s]} == build ]] && need_build=1; done
if ((need_build)) && ! prologue; then
  status=1; results+=("prologue:FAILED")
else
  for s in "${chosen[@]}"; do
    devs=("${devices[@]}")
    if [[ $FAST_NONE == *" $s "* && " ${devs[*]} " == *" fast "* ]]; then  # once, where it always ran
      devs=(disk); suite=$s; note "[$s] no fast-device pass: it writes no data on a file system (lib.sh FAST_NONE)"
    fi
    for device in "${devs[@]}"; do
      suite=$(dir_of "$device" "$s")  # the suite's folder under $OUT: <suite> on the disk, <suite>-fast
      ((GPU_DRY)) && echo "# suite $s on the $device$([[ $device == fast ]] && echo " device")"
      ran+=("$s:$device")
      if [[ $device == fast ]] && ! fast_up "$s"; then
        status=1; results+=("$suite:FAILED(no fast device)"); continue
      fi
      [[ $FAST_NONE == *" $s "* ]] || rates_of  # the reference of the ratios of a suite with data
      # a subshell: a suite's exports (a build of its own, PYTHONPATH; TMPDIR on the fast device) stay in it
      # in the background and waited for: a signal reaches the trap now, not when the suite ends
      ( [[ $device == fast ]] && { run mkdir -p "$fast_mnt/tmp"; export TMPDIR=$fast_mnt/tmp; }; "suite_${s//-/_}" ) &
      suite_pid=$!
      wait "$suite_pid"
      rc=$?
      suite_pid=""
      [[ $device == fast ]] && fast_down
      ((rc)) && status=1
      results+=("$suite:$( ((rc)) && echo "FAILED" || echo ok)")
    done
  done
fi
((GPU_DRY)) && exit $status
table | tee "$OUT/summary.txt"
pack
exit $status
