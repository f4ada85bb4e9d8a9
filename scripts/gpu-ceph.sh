#!/usr/bin/env bash
# GNStor on the GPU machine (issue 11): a one-node Ceph cluster from carried Debian 12 .debs (no root
# install, no mgr, no python3-rados), gpuio's rbd backend into GPU memory, the device-API prefetch from a
# kernel on a volume, one table.
#   bash scripts/gpu-ceph.sh fetch       # here (Debian 12, apt): the .debs into .carry/ceph/, sizes printed
#   bash scripts/gpu-ceph.sh [--no-build]  # there: unpack to /tmp/ceph, check, build, cluster, run
# Device tool: carry [".carry"] (ceph/ + the liburing .debs gpu-check.sh uses), command
#   `bash scripts/gpu-ceph.sh`. --no-build (tests here): use python/gpuio as it is (its _core must have rbd).
# Environment: GPU_CEPH_OSDS (3), GPU_CEPH_MIB (volume size, 1024), GPU_CEPH_SECONDS (per cell, 3),
#   GPU_CEPH_ALL_CARRIED=1 (use every carried dependency, also where the system has the library: tests here).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
debs=$repo/.carry/ceph
# Ceph itself: client libraries + headers (build), mon, OSD, ceph-base (monmaptool, the object classes
# cls_rbd/cls_lock librbd calls, erasure-code plugins the mon loads). No ceph-mgr: RBD I/O needs none, and it
# embeds Python 3.11 with its modules.
CEPH_DEBS="librados2 librbd1 librados-dev librbd-dev ceph-mon ceph-osd ceph-base"
# Optional: the rbd CLI (`rbd bench`, the CPU tool to compare with there) and what it adds.
TOOL_DEBS="ceph-common libradosstriper1 libboost-program-options1.74.0 libkeyutils1 libncurses6"
# Libraries the above link (ldd closure on Debian 12, glibc/libstdc++/libgcc excluded): only those the
# GPU machine lacks (by soname, ldconfig -p) are put on LD_LIBRARY_PATH.
DEP_DEBS="libboost-iostreams1.74.0 libboost-thread1.74.0 libfmt9 libibverbs1 librdmacm1 libnl-3-200
libnl-route-3-200 libleveldb1d libsnappy1v5 liblz4-1 libaio1 libargon2-1 libcryptsetup12 libdevmapper1.02.1
libfuse2 libdaxctl1 libndctl6 libpmem1 libjson-c5 libkmod2 libssl3 libzstd1 libudev1 libblkid1 libuuid1
libpcre2-8-0 libselinux1 libbz2-1.0 liblzma5 zlib1g"
LIMIT_MIB=58  # 64 MiB per device call, less the working tree (~4 MiB) and .carry's liburing

mib() { awk -v b="$1" 'BEGIN{printf "%.1f", b/1048576}'; }
sum_of() { local t=0 p f; for p in $1; do for f in "$debs"/${p}_*.deb; do [[ -f $f ]] && t=$((t + $(stat -c %s "$f"))); done; done; echo $t; }

if [[ ${1:-} == fetch ]]; then
  mkdir -p "$debs" && rm -f "$debs"/*.deb
  (cd "$debs" && apt-get download $CEPH_DEBS $TOOL_DEBS $DEP_DEBS >/dev/null 2>"$debs/.apt.log") \
    || { cat "$debs/.apt.log"; exit 1; }
  c=$(sum_of "$CEPH_DEBS"); t=$(sum_of "$TOOL_DEBS"); d=$(sum_of "$DEP_DEBS")
  printf '%-44s %8s MiB\n' "ceph (mon, osd, base, librados2, librbd1, -dev)" "$(mib $c)" \
    "tools (ceph-common: rbd CLI, + its libraries)" "$(mib $t)" "dependencies (30 libraries)" "$(mib $d)" \
    "total in $debs" "$(mib $((c + t + d)))"
  if (( c + t + d > LIMIT_MIB * 1048576 )); then echo "over ${LIMIT_MIB} MiB: drop TOOL_DEBS"; exit 1; fi
  echo "carry [\".carry\"]; command: bash scripts/gpu-ceph.sh"
  exit 0
fi

build=1
[[ ${1:-} == --no-build ]] && build=0
out=${OUT:-$repo/gpu-ceph-out}
mkdir -p "$out"
summary=$out/ceph-summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
step() { echo; echo "=== $* ==="; }
arch=$(uname -m)-linux-gnu
py=${PYTHON:-python3}  # the GPU machine: its python3 (typer, torch); here a venv with them

step "machine"
. /etc/os-release 2>/dev/null; note "os: ${PRETTY_NAME:-?}; $(ldd --version | head -1); python $($py -V 2>&1)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || note "no GPU (nvidia-smi absent)"

step "unpack the carried .debs"
ls "$debs"/*.deb >/dev/null 2>&1 || { note "no .debs in $debs: run 'bash scripts/gpu-ceph.sh fetch' where apt works, carry .carry"; exit 1; }
root=/tmp/ceph deps=/tmp/ceph-deps
rm -rf $root $deps && mkdir -p $root $deps $root/fallback
for f in "$debs"/*.deb; do
  p=$(basename "$f"); p=${p%%_*}
  if [[ " $CEPH_DEBS $TOOL_DEBS " == *" $p "* && $p != libboost* && $p != libkeyutils1 ]]; then dpkg -x "$f" $root; else dpkg -x "$f" $deps; fi
done
# A carried library goes on the path only where the system has none of that soname (a Debian 12 libssl
# or libudev in front of the system's newer one would break other programs of the process).
have_sys() { ldconfig -p | grep -q "^[[:space:]]$1 "; }
used=()
for l in $deps/lib/$arch/*.so.* $deps/usr/lib/$arch/*.so.*; do
  [[ -e $l ]] || continue
  n=$(basename "$l")
  if [[ ${GPU_CEPH_ALL_CARRIED:-0} == 1 ]] || ! have_sys "$n"; then ln -sf "$l" $root/fallback/"$n"; used+=("$n"); fi
done
note "carried libraries used (the system lacks them): ${used[*]:-none}"
lib=$root/usr/lib/$arch
export PATH=$root/usr/bin:$PATH
export LD_LIBRARY_PATH=$lib:$lib/ceph:$root/fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

step "ldd of every program and library the cluster and the client load"
bad=0
for f in $root/usr/bin/{ceph-mon,ceph-osd,monmaptool,rbd} $lib/librbd.so.1 $lib/librados.so.2 $lib/ceph/libceph-common.so.2 \
         $lib/rados-classes/libcls_{rbd,lock}.so.1 $lib/ceph/erasure-code/libec_jerasure.so; do
  [[ -e $f ]] || { [[ $f == */rbd ]] && continue; note "MISSING: $f"; bad=1; continue; }
  miss=$(ldd "$f" 2>&1 | grep -E "not found|No such file")
  if [[ -n $miss ]]; then
    [[ $f == */rbd ]] || bad=1  # the rbd CLI is optional (rbd bench): the run goes on without it
    while read -r m; do note "LDD FAIL $(basename "$f"): $m"; done <<< "$miss"
  fi
done
ceph-mon --version 2>&1 | head -1 | tee -a "$summary"
if ((bad)); then
  note "Ceph cannot run here with what was carried: the lines above name each missing library or symbol"
  note "version (GLIBC_x / GLIBCXX_x: this machine's C or C++ runtime is older than Debian 12's)."
  exit 1
fi
have_rbd_cli=0
rbd --version >/dev/null 2>&1 && have_rbd_cli=1

if ((build)); then
  step "build gpuio (CUDA, rbd backend against /tmp/ceph)"
  uring=/tmp/uring
  rm -rf $uring && mkdir -p $uring
  for f in .carry/liburing*.deb; do dpkg -x "$f" $uring; done
  pc=$uring/usr/lib/$arch/pkgconfig
  sed -i "s|=/usr|=$uring/usr|" $pc/liburing*.pc
  export PKG_CONFIG_PATH=$pc LD_LIBRARY_PATH=$uring/usr/lib/$arch:$LD_LIBRARY_PATH
  bdir=/tmp/gpuio-build-ceph site=/tmp/gpuio-site-ceph
  t0=$(date +%s)
  cmake -S . -B $bdir -G Ninja -DGPUIO_CUDA=ON -DGPUIO_RBD=ON -DGPUIO_BUILD_PYTHON=ON -DGPUIO_BUILD_TESTS=OFF \
    -DCMAKE_PREFIX_PATH=$root/usr -DPython_EXECUTABLE="$(command -v $py)" > "$out/ceph-build.log" 2>&1 \
    && cmake --build $bdir -j16 >> "$out/ceph-build.log" 2>&1 \
    || { tail -20 "$out/ceph-build.log"; note "BUILD FAILED (ceph-build.log)"; exit 1; }
  rm -rf $site && mkdir -p $site && cp -r python/gpuio $site/ && cp $bdir/cpp/src/bindings/_core*.so $bdir/cpp/libgpuio_rbd.so $site/gpuio/
  export PYTHONPATH=$site
  nvcc -O2 -std=c++17 -arch=sm_90 -Icpp/include tests/cuda/test_device_api.cu $bdir/cpp/libgpuio.a \
    -L$uring/usr/lib/$arch -luring -L$lib -lrbd -lrados -o /tmp/test_device_api \
    || { note "test_device_api build FAILED"; exit 1; }
  note "build: $(( $(date +%s) - t0 )) s"
else
  export PYTHONPATH=$repo/python
fi
export PYTHONUNBUFFERED=1
$py -c "import gpuio._core as c, sys; why = c.rbd_unavailable(); print(why); sys.exit(1 if why else 0)" \
  || { note "gpuio's rbd backend cannot be used (the line above says why)"; exit 1; }

step "cluster: 1 mon, ${GPU_CEPH_OSDS:-3} BlueStore-on-file OSDs, no mgr"
cdir=/tmp/gpuio-ceph-gpu
$py -c "import sys; from gpuio.volumes import cluster as c; sys.exit(0 if c.direct_io_works('/tmp') else 1)" \
  || cdir=$repo/.gpu-ceph-cluster  # /tmp on tmpfs: BlueStore needs O_DIRECT
gpuio() { $py -c "from gpuio.cli import main; main()" "$@"; }
[[ -f $cdir/cluster.json ]] && gpuio cluster down --dir $cdir >/dev/null 2>&1
t0=$(date +%s)
up() { PYTHONFAULTHANDLER=1 gpuio --debug cluster up --dir $cdir --osds "${GPU_CEPH_OSDS:-3}" --no-mgr 2> "$out/ceph-up.log"; }
conf=$(up)
rc=$?
if ((rc)); then  # name the cause: the CLI's own error, a Python stack (faulthandler) or the signal that killed it
  note "cluster up FAILED: exit $rc$( ((rc > 128)) && echo " (signal $((rc - 128)))")"
  cat "$out/ceph-up.log"
  for f in $cdir/log/*.log; do echo "--- $f"; grep -v "mon.a@\|^e1\|compat" "$f" | tail -8; done
  # Import orders (the std::locale copy once in _core bound whichever library loaded libstdc++ first), and the
  # last library inits before a crash.
  echo "--- probes (exit code :: code):"
  for code in "import gpuio._core" "import numpy; import gpuio._core" "import gpuio._core; import numpy" \
              "import torch; import gpuio._core" "import typer; import gpuio._core"; do
    $py -X faulthandler -c "$code; c = gpuio._core.RbdClient('$cdir/ceph.conf', '', '', 10)" > /tmp/probe.txt 2>&1; echo "$? :: $code"
  done
  $py -c "import numpy, os; d = os.path.dirname(numpy.__file__); print('numpy', numpy.__version__, os.listdir(d + '.libs') if os.path.isdir(d + '.libs') else 'no numpy.libs')"
  LD_DEBUG=files $py -c "import numpy; import gpuio._core" 2>&1 | grep -E "calling init|error" | tail -6
  if [[ $rc == 139 ]] && command -v cuda-gdb >/dev/null; then  # the native stack (no gdb there)
    echo "--- under cuda-gdb:"
    timeout 120 cuda-gdb -batch -ex "set pagination off" -ex run -ex "bt 30" --args $py -c "import numpy; import gpuio._core" 2>&1 \
      | grep -vE "^\[New Thread|^\[Thread|^warning: |^$" | tail -40
  fi
  gpuio cluster down --dir $cdir >/dev/null 2>&1
  exit 1
fi
note "cluster up in $(( $(date +%s) - t0 )) s: $conf"
osd_pid=$(cat $cdir/run/osd.0.pid)
note "osd.0 runs $(readlink /proc/$osd_pid/exe) with $(grep -o '/[^ ]*libceph-common.so[^ ]*' /proc/$osd_pid/maps | head -1)"
export CEPH_CONF=$conf
status=0

step "rbd backend: volume -> host and -> GPU memory; Basic; rbd bench"
vg=(benchmarks/volumes_gpu.py --conf "$conf" --mib "${GPU_CEPH_MIB:-1024}" --seconds "${GPU_CEPH_SECONDS:-3}"
    $( ((have_rbd_cli)) && echo --rbd-bench ) --json "$out/ceph-gpu.json")
PYTHONFAULTHANDLER=1 $py "${vg[@]}" > "$out/ceph-gpu.txt" 2>&1
rc=$?
cat "$out/ceph-gpu.txt"
if ((rc)); then
  status=1
  note "volumes_gpu.py FAILED: exit $rc$( ((rc > 128)) && echo " (signal $((rc - 128)))")"
  if ((rc > 128)) && command -v cuda-gdb >/dev/null; then  # a crash: its native stack (no gdb there)
    echo "--- again under cuda-gdb:"
    timeout 150 cuda-gdb -batch -ex "set pagination off" -ex run -ex "bt 40" --args $py "${vg[@]}" 2>&1 \
      | grep -vE "^\[New Thread|^\[Thread|^warning: |^$|^Download" | tail -50
  fi
fi
grep -E "^\||bar" "$out/ceph-gpu.txt" >> "$summary"

step "device API: prefetch / write_back from a kernel on a volume"
if [[ -x /tmp/test_device_api ]]; then
  gpuio volume create rbd/devapi 64M >/dev/null
  timeout 120 /tmp/test_device_api rbd:rbd/devapi 2>&1 | tail -3 | tee -a "$summary" || status=1
else
  note "device API: not built (--no-build)"
fi

gpuio cluster down --dir $cdir
exit $status
