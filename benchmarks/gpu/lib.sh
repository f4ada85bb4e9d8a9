# Shared by every suite of scripts/gpu.sh (sourced, not run): the build prologue, bounded steps, the memory cgroup,
# the call's deadline, dry-run printing and the rows of the final table.
# Set by gpu.sh before sourcing: repo (the repository root), OUT (the details folder), GPU_DRY (1: print commands).
# Environment read here:
#   GPUIO_CALL_S   seconds the whole call may take (default 570: the device tool's 600 less a margin; 0 = no
#                  deadline); every step's limit shrinks to what is left of it, so a slow step cannot eat the table
#   GPUIO_BUILD    "cuda" (default: the CUDA variant, -DGPUIO_CUDA=ON), "cpu" (-DGPUIO_CUDA=OFF: a CPU box), or
#                  "none" (no build: the gpuio that $GPUIO_PYTHON imports, e.g. a checkout's .venv)
#   GPUIO_PYTHON   the interpreter (default python3: the GPU machine's, with torch and PyG)
#   GPUIO_STACKS=0 no cuda-gdb stacks of a step that hangs (Python stacks still come: faulthandler)

py=${GPUIO_PYTHON:-python3}
build=/tmp/gpuio-build
site=/tmp/gpuio-site
uring=/tmp/uring
uring_lib=""       # -L folder of the carried liburing ("" where the system has it)
iobench=""         # the raw-device reference binary when .carry/iobench.c was carried
t_call=$(date +%s)
call_s=${GPUIO_CALL_S:-570}
summary=$OUT/summary.notes
suite=prologue     # the suite running now (names the rows)

q() { local a s=""; for a in "$@"; do s+="$(printf '%q' "$a") "; done; echo "${s% }"; }
# run CMD...: execute, or print it under --dry-run
run() { if ((GPU_DRY)); then echo "+ $(q "$@")"; return 0; fi; "$@"; }
# indir DIR CMD...: CMD in DIR (a subshell), printed under --dry-run
indir() { local d=$1; shift; if ((GPU_DRY)); then echo "+ cd $(q "$d")"; "$@"; return 0; fi; (cd "$d" && "$@"); }
note() { if ((GPU_DRY)); then echo "# $*"; else echo "$*" | tee -a "$summary"; fi; }
step() { echo; echo "=== [$suite] $* ==="; }
left() { if ((call_s > 0)); then echo $(( t_call + call_s - $(date +%s) )); else echo 999999; fi; }
# within LIMIT RESERVE: LIMIT, or what is left of the call less RESERVE when that is smaller (at least 1)
within() { local l=$(( $(left) - $2 )); if (( l < $1 )); then echo $(( l > 1 ? l : 1 )); else echo "$1"; fi; }
# row STEP RC SECONDS LIMIT: one line of $OUT/<suite>/steps.tsv (the final table; apps_summary.py reads it too)
row() { mkdir -p "$OUT/$suite"; printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$OUT/$suite/steps.tsv"; }
drop_caches() { run sync; if ((GPU_DRY)); then echo "+ echo 3 > /proc/sys/vm/drop_caches"; else echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; fi; }

# bounded NAME CAP CMD...: CMD with a time limit (CAP, or what is left of the call less BOUNDED_RESERVE, default
# 20 s, for the table); its output in $OUT/<suite>/NAME.txt and the last GPUIO_TAIL (14) lines of it (lines matching
# BOUNDED_SHOW when set) on the console; a row (rc, seconds, limit) for the final table. At the limit: the native
# stacks of every thread (cuda-gdb, the GPU machine has no gdb; while 90 s of the call are left), then SIGABRT
# (faulthandler prints the Python stacks) -- or, with BOUNDED_TERM=1, SIGTERM first and 15 s to exit (a job that
# prints its report on SIGTERM) -- then SIGKILL of the whole process group; rc 124. A step with under 15 s left is
# skipped (rc 99).
# tree_commit: the checkout's commit, "+ changes" where the tracked files differ from it (a copied working tree
# can carry an older .git than its files: name the run's commit with GPUIO_COMMIT then)
tree_commit() {
  local c
  c=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null) || { echo '? (no .git: set GPUIO_COMMIT)'; return; }
  if git -C "$repo" diff --quiet HEAD -- 2>/dev/null; then echo "$c"; else echo "$c + changes (set GPUIO_COMMIT)"; fi
}

bounded() {
  local name=$1 cap=$2; shift 2
  local log=$OUT/$suite/$name.txt lim l=$(( $(left) - ${BOUNDED_RESERVE:-20} ))
  lim=$(( cap < l ? cap : l ))
  if ((GPU_DRY)); then echo "+ [$name, limit ${cap} s] $(q "$@")"; return 0; fi
  if (( lim < 15 )); then
    note "[$suite/$name] SKIPPED: $(left) s left of the call"; row "$name" skipped 0 "$cap"; return 99
  fi
  mkdir -p "$OUT/$suite"
  echo; echo "=== [$suite] $name (limit ${lim} s, $(( $(date +%s) - t_call )) s into the call) ==="
  local t0 pid rc i p
  t0=$(date +%s)
  PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1 setsid "$@" > "$log" 2>&1 &
  pid=$!
  echo "$pid" > "$OUT/.step.pid"  # gpu.sh's signal trap stops the step's process group (its own session)
  for ((i = 0; i < lim * 5; i++)); do kill -0 $pid 2>/dev/null || break; sleep 0.2; done
  if kill -0 $pid 2>/dev/null; then
    echo "[$name] still running at its limit of ${lim} s (pid $pid)" | tee -a "$log"
    if [[ ${BOUNDED_TERM:-0} == 1 ]]; then
      kill -TERM -- -$pid 2>/dev/null
      for ((i = 0; i < 75; i++)); do kill -0 $pid 2>/dev/null || break; sleep 0.2; done
    fi
    # stacks of the step and of at most 2 children, 20 s each, while the call has time for them (a DataLoader's
    # workers are children too: one dump each cost the whole call's last minutes once)
    if kill -0 $pid 2>/dev/null && [[ ${GPUIO_STACKS:-1} == 1 ]] && command -v cuda-gdb > /dev/null; then
      for p in $pid $(pgrep -P $pid | head -2); do
        (( $(left) > 90 )) || break
        timeout 20 cuda-gdb -p "$p" -batch -ex "thread apply all bt 14" 2>&1 | grep -E "^Thread|^#" \
          | grep -vE "in (clone|start_thread)" | head -80 | tee -a "$log"
      done
    fi
    kill -ABRT -- -$pid 2>/dev/null; sleep 2; kill -KILL -- -$pid 2>/dev/null
    wait $pid 2>/dev/null
    rc=124
  else
    wait $pid; rc=$?
  fi
  if [[ -n ${BOUNDED_SHOW:-} ]]; then grep -E "$BOUNDED_SHOW" "$log" | tail -n "${GPUIO_TAIL:-60}" | cut -c1-400
  else grep -v "^io-diag" "$log" | tail -n "${GPUIO_TAIL:-14}" | cut -c1-400; fi
  rm -f "$OUT/.step.pid"
  ((rc == 124 || rc == 137)) && echo "[$name] CUT at its limit of ${lim} s"
  echo "[$name] rc=$rc in $(( $(date +%s) - t0 )) s"
  row "$name" "$rc" "$(( $(date +%s) - t0 ))" "$lim"
  return $rc
}

# in_cgroup MEM CMD...: CMD (a function too) in a subshell whose memory, page cache included, is limited to MEM: a
# cgroup v2 memory.max (the GPU machine) or a v1 memory.limit_in_bytes (the 2-core dev/CI boxes; BENCHMARKS.md); prints
# the group's peak. GPUIO_NO_CGROUP=1 runs CMD as it is.
in_cgroup() {
  local mem=$1; shift
  if ((GPU_DRY)); then echo "+ [cgroup memory limit $mem]"; "$@"; return 0; fi
  if [[ ${GPUIO_NO_CGROUP:-0} == 1 ]]; then "$@"; return; fi
  local name=gpuio-$suite-$$-$RANDOM cg peak rc
  if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    cg=/sys/fs/cgroup/$name peak=memory.peak
    grep -qw memory /sys/fs/cgroup/cgroup.subtree_control || echo +memory > /sys/fs/cgroup/cgroup.subtree_control
    mkdir -p "$cg" && echo "$mem" > "$cg/memory.max" || { note "[$suite] cgroup $mem could not be made"; return 1; }
  elif [[ -d /sys/fs/cgroup/memory ]]; then
    cg=/sys/fs/cgroup/memory/$name peak=memory.max_usage_in_bytes
    mkdir -p "$cg" && echo "$mem" > "$cg/memory.limit_in_bytes" || { note "[$suite] cgroup $mem could not be made"; return 1; }
  else
    note "[$suite] no memory cgroup on this machine (GPUIO_NO_CGROUP=1 runs without one)"; return 1
  fi
  (echo $BASHPID > "$cg/cgroup.procs" && "$@"); rc=$?
  echo "[cgroup] memory limit $mem, peak $(cat "$cg/$peak" 2>/dev/null)"
  rmdir "$cg" 2>/dev/null
  return $rc
}

# --- the build prologue: once per call, and a warm machine's build is reused (ninja rebuilds what changed) ---

machine() {
  step "machine"
  if ((GPU_DRY)); then echo "+ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader"; return 0; fi
  mkdir -p "$OUT"
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
  else
    echo "no nvidia-smi: a machine without a GPU" | tee "$OUT/gpu.txt"
  fi
  { echo; df -h "$repo" /tmp /dev/shm; echo; lsblk -o NAME,SIZE,ROTA,TYPE,MOUNTPOINT | head -20; } >> "$OUT/gpu.txt" 2>/dev/null
  note "machine: $(head -1 "$OUT/gpu.txt"), $(nproc) cpus; commit ${GPUIO_COMMIT:-$(tree_commit)}; $(date -u +%FT%TZ)"
}

# liburing: the carried .debs (the GPU machine has no liburing-dev) unpacked once to /tmp/uring, else the system's
uring_setup() {
  if ls "$repo"/.carry/liburing*.deb > /dev/null 2>&1; then
    local stamp; stamp=$(cd "$repo/.carry" && ls liburing*.deb | tr '\n' ' ')
    if ((GPU_DRY)); then echo "+ dpkg -x .carry/liburing*.deb $uring"
    elif [[ $(cat $uring/.stamp 2>/dev/null) != "$stamp" ]]; then
      rm -rf $uring && mkdir -p $uring
      for f in "$repo"/.carry/liburing*.deb; do dpkg -x "$f" $uring; done
      sed -i "s|=/usr|=$uring/usr|" $uring/usr/lib/x86_64-linux-gnu/pkgconfig/liburing*.pc  # the .pc names /usr outright
      echo "$stamp" > $uring/.stamp
    fi
    uring_lib=$uring/usr/lib/x86_64-linux-gnu
    export PKG_CONFIG_PATH=$uring_lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export LD_LIBRARY_PATH=$uring_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  elif ((GPU_DRY)) || pkg-config --exists liburing; then
    :
  else
    note "no liburing: carry .carry/ with the liburing2 and liburing-dev .debs (apt-get download liburing2 liburing-dev)"
    return 1
  fi
}

# iobench (../shared/tools/iobench.c, carried as .carry/iobench.c): the team's raw-device reference tool
iobench_setup() {
  # (--dry-run prints the commands as if it were carried)
  ((GPU_DRY)) || [[ -f $repo/.carry/iobench.c ]] || { note "no .carry/iobench.c: steps that compare with iobench skip it"; return 0; }
  local inc=() lib=()
  [[ -n $uring_lib ]] && inc=(-I$uring/usr/include) && lib=(-L$uring_lib)
  if ((GPU_DRY)) || [[ ! /tmp/iobench -nt $repo/.carry/iobench.c ]]; then
    run gcc -O2 -o /tmp/iobench "$repo/.carry/iobench.c" "${inc[@]}" "${lib[@]}" -luring -lpthread \
      || { note "iobench build FAILED"; return 0; }
  fi
  iobench=/tmp/iobench
}

# build_tree SRC BUILD SITE [CMAKE_ARG...]: configure (only when BUILD holds another tree's or other options' cache),
# build with ninja, then SITE = SRC's python/gpuio (with _core) and python/gpuio_apps (with _raw; older trees have no
# gpuio_apps and keep _raw in gpuio). Log: $OUT/build.log.
build_tree() {
  local src=$1 bdir=$2 sdir=$3; shift 3
  local args=(-G Ninja -DGPUIO_BUILD_PYTHON=ON -DGPUIO_BUILD_TESTS=OFF -DPython_EXECUTABLE="$(command -v "$py")" "$@")
  local key; key=$(q "$src" "${args[@]}")
  if ((GPU_DRY)); then
    run cmake -S "$src" -B "$bdir" "${args[@]}"; run cmake --build "$bdir" -j"$(nproc)"
    echo "+ cp -r $src/python/gpuio $src/python/gpuio_apps $sdir/; cp $bdir/cpp/src/bindings/_core*.so [$bdir/cpp/libgpuio_rbd.so.1] $sdir/gpuio/; cp $bdir/cpp/tools/raw/_raw*.so $sdir/gpuio_apps/"
    return 0
  fi
  [[ $(cat "$bdir/.gpuio-configure" 2>/dev/null) == "$key" ]] || rm -rf "$bdir"  # another tree or other options
  local t0; t0=$(date +%s)
  { [[ -f $bdir/build.ninja ]] || { cmake -S "$src" -B "$bdir" "${args[@]}" && echo "$key" > "$bdir/.gpuio-configure"; }; } \
    >> "$OUT/build.log" 2>&1 && cmake --build "$bdir" -j"$(nproc)" >> "$OUT/build.log" 2>&1
  local rc=$?
  tail -n $(( rc ? 25 : 3 )) "$OUT/build.log"
  if ((rc)); then note "BUILD FAILED (the end of build.log above)"; return 1; fi
  local mods=("$bdir"/cpp/src/bindings/_core*.so) raw=("$bdir"/cpp/tools/raw/_raw*.so) rbd=("$bdir"/cpp/libgpuio_rbd.so.1)
  [[ -f ${mods[0]} ]] || { note "BUILD FAILED: no _core module in $bdir"; return 1; }
  [[ -f ${rbd[0]} ]] && mods+=("${rbd[@]}")  # the rbd plugin (built where librbd is found), loaded on demand
  local apps=gpuio  # where _raw goes: the applications' package, or gpuio in trees from before it
  rm -rf "$sdir" && mkdir -p "$sdir" && cp -r "$src/python/gpuio" "$sdir/" && cp "${mods[@]}" "$sdir/gpuio/" || return 1
  if [[ -d $src/python/gpuio_apps ]]; then cp -r "$src/python/gpuio_apps" "$sdir/" && apps=gpuio_apps || return 1; fi
  # trees before the raw reference left libgpuio have no _raw
  if [[ -f ${raw[0]} ]]; then cp "${raw[@]}" "$sdir/$apps/" || return 1; fi
  note "build of $src: $(( $(date +%s) - t0 )) s ($bdir)"
}

# the carried wheels (.whl/: KvikIO and its two dependencies), installed once into /tmp/whl-site
wheels() {
  ls "$repo"/.whl/*.whl > /dev/null 2>&1 || return 0
  if ((GPU_DRY)); then echo "+ $py -m pip install --no-index --no-deps --target /tmp/whl-site .whl/*.whl"; return 0; fi
  local stamp; stamp=$(cd "$repo/.whl" && ls *.whl | tr '\n' ' ')
  if [[ $(cat /tmp/whl-site/.stamp 2>/dev/null) != "$stamp" ]]; then
    rm -rf /tmp/whl-site
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/whl-site "$repo"/.whl/*.whl \
      && echo "$stamp" > /tmp/whl-site/.stamp && note "wheels installed: $stamp" || note "wheel install FAILED ($stamp)"
  fi
}

# nvprog NAME SOURCE [LINK_ARG...]: a CUDA test program against the built libgpuio, /tmp/NAME (rebuilt when its
# source, a public header or the library is newer)
nvprog() {
  local name=$1 src=$2; shift 2
  local lib=(); [[ -n $uring_lib ]] && lib=(-L"$uring_lib")
  if ((GPU_DRY)) || [[ ! -x /tmp/$name || -n $(find "$repo/$src" "$repo/cpp/include" "$build/cpp/libgpuio.a" \
                                                   -newer "/tmp/$name" -print -quit 2>/dev/null) ]]; then
    run nvcc -O2 -std=c++17 -arch=sm_90 -I"$repo/cpp/include" "$repo/$src" "$build/cpp/libgpuio.a" "${lib[@]}" -luring "$@" \
      -o "/tmp/$name" || { note "[$suite] nvcc of $src FAILED"; return 1; }
  fi
}

prologue() {
  machine
  step "build (${GPUIO_BUILD:-cuda})"
  uring_setup || return 1
  iobench_setup
  case ${GPUIO_BUILD:-cuda} in
    cuda) build_tree "$repo" $build $site -DGPUIO_CUDA=ON || return 1 ;;
    cpu) build=/tmp/gpuio-build-cpu site=/tmp/gpuio-site-cpu; build_tree "$repo" $build $site -DGPUIO_CUDA=OFF || return 1 ;;
    none) site=""; note "no build: $py's gpuio ($( ((GPU_DRY)) || "$py" -c 'import gpuio; print(gpuio.__file__)' 2>&1))" ;;
    *) note "GPUIO_BUILD '$GPUIO_BUILD': not one of cuda, cpu, none"; return 2 ;;
  esac
  wheels
  export PYTHONPATH=${site:+$site:}/tmp/whl-site:$repo/tests/python${PYTHONPATH:+:$PYTHONPATH}
  export PYTHONUNBUFFERED=1
  ((GPU_DRY)) && return 0
  local used; used=$("$py" -c 'import gpuio; print(gpuio.__file__)' 2>&1)
  [[ -z $site || $used == "$site"/* ]] \
    || note "WARNING: $py imports gpuio from $used, not from the build in $site (an editable install shadows PYTHONPATH)"
  "$py" -c "from gpuio_apps.cli.info import info; info(json_out=False)" > "$OUT/info.txt" 2>&1 || true
}

# --- the devices a suite runs on (GPUIO_DEVICE): the disk, the fast device (docs/BENCHMARKS.md "The fast device") ---
# gpu.sh runs each chosen suite once per device: on the disk as always; on the fast device after making it
# (python/gpuio_apps/bench/fastdev.py, from this shell, outside every memory cgroup) sized for the suite's data
# from free RAM, with the suite's data paths (`on PATH`) and TMPDIR under its mount, and its rows in
# $OUT/<suite>-fast; the device is removed after the suite, and by gpu.sh's exit trap on an error or a signal.
#   GPUIO_DEVICE      disk (default), fast, both (disk then fast), or a list: "disk,fast"
#   GPUIO_FAST_GIB    the fast device's size (default: the suite's data, fast_need_gib, as far as free RAM allows)
#   GPUIO_FAST_MOUNT  its mount point (default /mnt/gpuio-fast)
#   GPUIO_RATES       1: the devices' raw rates (iobench, once per device and call: rates_of); default 1 when the
#                     fast device is among the call's devices, else 0
device=disk                                  # the device the suite running now writes its data on
fast_mnt=${GPUIO_FAST_MOUNT:-/mnt/gpuio-fast}
fast_made=0
fastdev=("$py" "$repo/python/gpuio_apps/bench/fastdev.py")  # stdlib only: runs before and without a build
rates_done=" "
rates_default=0    # gpu.sh: 1 when the fast device is among the call's devices
RATES_CFGS=("4096 128 1 rand" "4096 128 2 rand" "1048576 32 1 seq")  # bs qd threads pattern (iobench, io_uring, O_DIRECT)

# on PATH: where a suite's data at PATH goes on the device running now (the disk: PATH; the fast device: PATH's
# last name under its mount, the folder above it made)
on() {
  [[ $device == fast ]] || { echo "$1"; return; }
  local p=$fast_mnt/${1##*/}
  ((GPU_DRY)) || mkdir -p "$fast_mnt"
  echo "$p"
}
tmp_root() { if [[ $device == fast ]]; then echo "$fast_mnt/tmp"; else echo /tmp; fi; }
dir_of() { if [[ $1 == disk ]]; then echo "$2"; else echo "$2-$1"; fi; }  # dir_of DEVICE SUITE: the suite's $OUT folder

# suites with no fast-device pass: they write no data on a file system, or read emulated devices or a Ceph cluster
# (`build` keeps one: with GPUIO_DEVICE=both it is the cheap call that measures both devices' raw rates)
FAST_NONE=" weights-wheels ceph-fetch ceph compare-demo sim ceiling scaling controller threads "

# fast_need_gib SUITE: GiB of data SUITE writes at its settings (its biggest moment; steps check their own space)
fast_need_gib() {
  case $1 in
    check|latency|kvikio|ceiling) echo $(( ${GPUIO_DATA_GIB:-8} + 2 )) ;;
    host|host-quick) echo 6 ;;
    demo|workers-demo) echo 6 ;;   # 2M nodes x 128 fp32 features: 1 GiB
    gather) echo $(( ${GPUIO_GATHER_FILE_MIB:-4096} * 2 / 1024 + 2 )) ;;  # a table of 4096 B rows and one of 512 B
    weights) awk -v g="${GPUIO_WEIGHTS_GIB:-8.25}" 'BEGIN { printf "%d", 3.1 * g + 2.5 }' ;;  # the model, two saves
    weights-ranks|weights-dist) awk -v g="${GPUIO_WEIGHTS_GIB:-8.25}" 'BEGIN { printf "%d", 2.2 * g + 2.5 }' ;;
    streams|workers) echo 10 ;;
    apps) echo 34 ;;   # sort takes 2 Gi keys under 50 GiB free; vecadd 24 GiB
    graph) echo 20 ;;
    *) echo 16 ;;
  esac
}

# fast_up SUITE: make the fast device for SUITE (a one-line note and rc 1 when it cannot be made)
fast_up() {
  local args=(make --mount "$fast_mnt" --need-gib "$(fast_need_gib "$1")") out
  [[ -n ${GPUIO_FAST_GIB:-} ]] && args=(make --mount "$fast_mnt" --gib "$GPUIO_FAST_GIB")
  if ((GPU_DRY)); then run "${fastdev[@]}" "${args[@]}"; return 0; fi
  fast_made=1
  out=$("${fastdev[@]}" "${args[@]}" 2>&1) || { fast_made=0; note "[$suite] fast device not made: ${out##*error: }"; return 1; }
  fast_label=${out% at /*}
  note "[$suite] $out"
}
fast_down() {
  if ((GPU_DRY)); then run "${fastdev[@]}" remove --mount "$fast_mnt"; return 0; fi
  ((fast_made)) || return 0
  "${fastdev[@]}" remove --mount "$fast_mnt" > /dev/null 2>&1 || echo "gpu.sh: fast device at $fast_mnt: remove FAILED" >&2
  fast_made=0
}

# rates_of: the raw rates of the device running now, once per call (iobench: 4 KiB random reads 1 and 2 threads
# x QD128, 1 MiB sequential reads QD32, io_uring O_DIRECT, 3 s each), on its block device and on a file written
# on its file system; rows in $OUT/rates.tsv (the table at the end), the reference of every ratio of the call
rates_of() {
  [[ $rates_done == *" $device "* ]] && return 0
  rates_done+="$device "
  [[ ${GPUIO_RATES:-$rates_default} == 1 ]] || return 0
  [[ -n $iobench ]] || { note "no iobench: no raw rates of the $device device"; return 0; }
  local file bdev cfg t bs qd thr pat name
  file=$(on "$repo/gpuio-rates.bin")
  if [[ $device == fast ]]; then bdev=$(findmnt -n -o SOURCE --mountpoint "$fast_mnt" 2>/dev/null | tail -1)
  else bdev=$(findmnt -n -o SOURCE --target "$repo" 2>/dev/null | tail -1); fi
  ((GPU_DRY)) && bdev="<the block device of the $device>"
  # a block device this machine lets us read (a container may not: the file's rates then stand alone)
  ((GPU_DRY)) || { [[ -b $bdev ]] && dd if="$bdev" of=/dev/null bs=4k count=1 iflag=direct status=none 2>/dev/null; } \
    || bdev=""
  run dd if=/dev/zero of="$file" bs=1M count="${GPUIO_RATES_MIB:-2048}" oflag=direct conv=fsync status=none
  for t in block file; do
    local target=$file; [[ $t == block ]] && target=$bdev
    [[ -n $target ]] || { note "[$suite] the $device's block device cannot be read here: its file's raw rates only"; continue; }
    for cfg in "${RATES_CFGS[@]}"; do
      read -r bs qd thr pat <<< "$cfg"
      name=rates-$device-$t-$(( bs >> 10 ))k-${thr}thr
      GPUIO_TAIL=1 bounded "$name" 15 "$iobench" "$target" "$bs" "$qd" "$thr" 3 1 "$([[ $pat == seq ]] && echo 1 || echo 0)" 0 1 \
        && ((!GPU_DRY)) && printf '%s\t%s\t%s\t%s\n' "$device" "$t" "$cfg" "$(tail -1 "$(log_of "$name")" | sed 's/.*: //')" >> "$OUT/rates.tsv"
    done
  done
  run rm -f "$file"
}

# rates_table: the devices' raw rates measured in this call, one row per device and target
rates_table() {
  [[ -f $OUT/rates.tsv ]] || return 0
  echo; echo "| device | target | 4 KiB random, 1 thread QD128 | 4 KiB random, 2 threads QD128 | 1 MiB sequential, QD32 |"
  echo "|---|---|---:|---:|---:|"
  awk -F'\t' '{ k = $1 "\t" $2; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
                split($4, r, " "); v = ($3 ~ /seq/) ? r[3] " GB/s" : sprintf("%.0f K IOPS", r[1] / 1000); cell[k, $3] = v }
       END { for (i = 1; i <= n; i++) { split(order[i], d, "\t")
               printf "| %s | %s | %s | %s | %s |\n", d[1], d[2] == "block" ? "raw block device" : "file on its file system",
                 cell[order[i], "4096 128 1 rand"], cell[order[i], "4096 128 2 rand"], cell[order[i], "1048576 32 1 seq"] } }' "$OUT/rates.tsv"
}
