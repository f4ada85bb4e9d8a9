# GNStor on the GPU machine (sourced by scripts/gpu.sh): a one-node Ceph cluster from carried Debian 12 .debs (no root
# install, no mgr, no python3-rados), gpuio's rbd backend into GPU memory, the device-API prefetch from a kernel on a
# volume, one table.
#   bash scripts/gpu.sh ceph-fetch   # here (Debian 12, apt): the .debs into .carry/ceph/, sizes printed
#   bash scripts/gpu.sh ceph         # there (carry .carry): unpack to /tmp/ceph, check, build, cluster, run
# Environment: GPU_CEPH_OSDS (3), GPU_CEPH_MIB (volume size, 1024), GPU_CEPH_SECONDS (per cell, 3),
#   GPU_CEPH_ALL_CARRIED=1 (use every carried dependency, also where the system has the library: tests here),
#   GPUIO_BUILD=none (use $GPUIO_PYTHON's gpuio as it is: its _core must have rbd).

# Ceph itself: client libraries + headers (build), mon, OSD, ceph-base (monmaptool, the object classes cls_rbd/cls_lock
# librbd calls, erasure-code plugins the mon loads). No ceph-mgr: RBD I/O needs none, and it embeds Python 3.11.
CEPH_DEBS="librados2 librbd1 librados-dev librbd-dev ceph-mon ceph-osd ceph-base"
# Optional: the rbd CLI (`rbd bench`, the CPU tool to compare with there) and what it adds.
CEPH_TOOL_DEBS="ceph-common libradosstriper1 libboost-program-options1.74.0 libkeyutils1 libncurses6"
# Libraries the above link (ldd closure on Debian 12, glibc/libstdc++/libgcc excluded): only those the GPU machine
# lacks (by soname, ldconfig -p) are put on LD_LIBRARY_PATH.
CEPH_DEP_DEBS="libboost-iostreams1.74.0 libboost-thread1.74.0 libfmt9 libibverbs1 librdmacm1 libnl-3-200
libnl-route-3-200 libleveldb1d libsnappy1v5 liblz4-1 libaio1 libargon2-1 libcryptsetup12 libdevmapper1.02.1
libfuse2 libdaxctl1 libndctl6 libpmem1 libjson-c5 libkmod2 libssl3 libzstd1 libudev1 libblkid1 libuuid1
libpcre2-8-0 libselinux1 libbz2-1.0 liblzma5 zlib1g"
CEPH_LIMIT_MIB=58  # 64 MiB per device call, less the working tree (~4 MiB) and .carry's liburing

suite ceph-fetch none "where apt works (Debian 12): download the Ceph .debs the ceph suite carries into .carry/ceph/"
suite_ceph_fetch() {
  local debs=$repo/.carry/ceph c t d
  mib() { awk -v b="$1" 'BEGIN{printf "%.1f", b/1048576}'; }
  sum_of() { local n=0 p f; for p in $1; do for f in "$debs"/${p}_*.deb; do [[ -f $f ]] && n=$((n + $(stat -c %s "$f"))); done; done; echo $n; }
  run mkdir -p "$debs"
  ((GPU_DRY)) || rm -f "$debs"/*.deb
  indir "$debs" run apt-get download $CEPH_DEBS $CEPH_TOOL_DEBS $CEPH_DEP_DEBS || return 1
  ((GPU_DRY)) && return 0
  c=$(sum_of "$CEPH_DEBS"); t=$(sum_of "$CEPH_TOOL_DEBS"); d=$(sum_of "$CEPH_DEP_DEBS")
  printf '%-44s %8s MiB\n' "ceph (mon, osd, base, librados2, librbd1, -dev)" "$(mib $c)" \
    "tools (ceph-common: rbd CLI, + its libraries)" "$(mib $t)" "dependencies (30 libraries)" "$(mib $d)" \
    "total in $debs" "$(mib $((c + t + d)))"
  if (( c + t + d > CEPH_LIMIT_MIB * 1048576 )); then note "over ${CEPH_LIMIT_MIB} MiB: drop CEPH_TOOL_DEBS"; return 1; fi
  echo "carry [\".carry\"]; command: bash scripts/gpu.sh ceph"
}

suite ceph none "Ceph on the GPU machine from carried .debs (bash scripts/gpu.sh ceph-fetch first, where apt works): \
cluster of 1 mon + 3 OSDs, the rbd backend into host and GPU memory beside Basic and rbd bench, the device API on a \
volume (GPU_CEPH_OSDS, GPU_CEPH_MIB, GPU_CEPH_SECONDS)"
suite_ceph() {
  local debs=$repo/.carry/ceph root=/tmp/ceph deps=/tmp/ceph-deps arch; arch=$(uname -m)-linux-gnu
  local lib=$root/usr/lib/$arch status=0
  machine
  ((GPU_DRY)) || ls "$debs"/*.deb > /dev/null 2>&1 \
    || { note "no .debs in $debs: run 'bash scripts/gpu.sh ceph-fetch' where apt works, carry .carry"; return 1; }
  ceph_unpack || return 1
  export PATH=$root/usr/bin:$PATH
  export LD_LIBRARY_PATH=$lib:$lib/ceph:$root/fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  ceph_ldd || return 1
  local have_rbd_cli=0
  ((GPU_DRY)) || ! rbd --version > /dev/null 2>&1 || have_rbd_cli=1
  uring_setup || return 1
  if [[ ${GPUIO_BUILD:-cuda} == none ]]; then
    export PYTHONPATH=$repo/python${PYTHONPATH:+:$PYTHONPATH}
  else
    build=/tmp/gpuio-build-ceph site=/tmp/gpuio-site-ceph
    build_tree "$repo" $build $site -DGPUIO_CUDA=ON -DGPUIO_RBD=ON -DCMAKE_PREFIX_PATH=$root/usr || return 1
    export PYTHONPATH=$site
    nvprog test_device_api_rbd tests/cuda/test_device_api.cu -L"$lib" -lrbd -lrados || return 1
  fi
  export PYTHONUNBUFFERED=1
  ((GPU_DRY)) || "$py" -c "import gpuio._core as c, sys; why = c.rbd_unavailable(); print(why); sys.exit(1 if why else 0)" \
    || { note "gpuio's rbd backend cannot be used (the line above says why)"; return 1; }
  local cdir=/tmp/gpuio-ceph-gpu conf f
  ((GPU_DRY)) || "$py" -c "import sys; from gpuio_apps import cluster as c; sys.exit(0 if c.direct_io_works('/tmp') else 1)" \
    || cdir=$repo/.gpu-ceph-cluster  # /tmp on tmpfs: BlueStore needs O_DIRECT
  ((GPU_DRY)) || [[ ! -f $cdir/cluster.json ]] || "$py" -m gpuio cluster down --dir $cdir > /dev/null 2>&1
  GPUIO_TAIL=3 bounded cluster-up 120 "$py" -m gpuio --debug cluster up --dir $cdir --osds "${GPU_CEPH_OSDS:-3}" --no-mgr \
    || { ceph_why_not_up "$cdir"; run "$py" -m gpuio cluster down --dir $cdir; return 1; }
  conf=$cdir/ceph.conf  # `gpuio cluster up` writes it there (and prints it)
  ((GPU_DRY)) || note "cluster up: $conf; osd.0 runs $(readlink /proc/"$(cat $cdir/run/osd.0.pid)"/exe)"
  export CEPH_CONF=$conf
  local vg=(benchmarks/volumes_gpu.py --conf "$conf" --mib "${GPU_CEPH_MIB:-1024}" --seconds "${GPU_CEPH_SECONDS:-3}"
            --json "$OUT/ceph/ceph-gpu.json")
  ((have_rbd_cli)) && vg+=(--rbd-bench)
  GPUIO_TAIL=40 bounded volumes-gpu 300 "$py" "${vg[@]}" || status=1
  ((GPU_DRY)) || grep -E "^\||bar" "$(log_of volumes-gpu)" >> "$summary"
  if [[ ${GPUIO_BUILD:-cuda} != none ]]; then  # prefetch / write_back from a kernel on a volume
    run "$py" -m gpuio volume create rbd/devapi 64M
    GPUIO_TAIL=3 bounded device-api 120 /tmp/test_device_api_rbd rbd:rbd/devapi || status=1
    say device-api 2
  fi
  run "$py" -m gpuio cluster down --dir $cdir
  return $status
}

# the carried .debs: Ceph itself to /tmp/ceph, the libraries to /tmp/ceph-deps; a carried library goes on the path
# only where the system has none of that soname (a Debian 12 libssl in front of the system's newer one would break
# other programs of the process)
ceph_unpack() {
  if ((GPU_DRY)); then echo "+ dpkg -x .carry/ceph/*.deb $root (libraries: $deps, on the path where the system lacks them)"; return 0; fi
  rm -rf $root $deps && mkdir -p $root $deps $root/fallback
  local f p l n used=()
  for f in "$debs"/*.deb; do
    p=$(basename "$f"); p=${p%%_*}
    if [[ " $CEPH_DEBS $CEPH_TOOL_DEBS " == *" $p "* && $p != libboost* && $p != libkeyutils1 ]]; then dpkg -x "$f" $root
    else dpkg -x "$f" $deps; fi
  done
  for l in $deps/lib/$arch/*.so.* $deps/usr/lib/$arch/*.so.*; do
    [[ -e $l ]] || continue
    n=$(basename "$l")
    if [[ ${GPU_CEPH_ALL_CARRIED:-0} == 1 ]] || ! ldconfig -p | grep -q "^[[:space:]]$n "; then
      ln -sf "$l" $root/fallback/"$n"; used+=("$n")
    fi
  done
  note "carried libraries used (the system lacks them): ${used[*]:-none}"
}

# ldd of every program and library the cluster and the client load: each missing library or symbol version named
ceph_ldd() {
  ((GPU_DRY)) && { echo "+ ldd ceph-mon ceph-osd monmaptool rbd librbd librados libceph-common cls_rbd cls_lock ec_jerasure"; return 0; }
  local bad=0 f miss m
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
    note "Ceph cannot run here with what was carried: the lines above name each missing library or symbol version"
    note "(GLIBC_x / GLIBCXX_x: this machine's C or C++ runtime is older than Debian 12's)."
    return 1
  fi
}

# why `cluster up` failed: the CLI's own error, the daemons' logs, import-order probes, the native stack (cuda-gdb)
ceph_why_not_up() {
  ((GPU_DRY)) && return 0
  local cdir=$1 code
  for f in "$cdir"/log/*.log; do echo "--- $f"; grep -v "mon.a@\|^e1\|compat" "$f" | tail -8; done
  echo "--- probes (exit code :: code):"
  for code in "import gpuio._core" "import numpy; import gpuio._core" "import gpuio._core; import numpy" \
              "import torch; import gpuio._core" "import typer; import gpuio._core"; do
    "$py" -X faulthandler -c "$code; c = gpuio._core.RbdClient('$cdir/ceph.conf', '', '', 10)" > /dev/null 2>&1; echo "$? :: $code"
  done
  if command -v cuda-gdb > /dev/null; then
    echo "--- under cuda-gdb:"
    timeout 120 cuda-gdb -batch -ex "set pagination off" -ex run -ex "bt 30" --args "$py" -c "import numpy; import gpuio._core" 2>&1 \
      | grep -vE "^\[New Thread|^\[Thread|^warning: |^$" | tail -40
  fi
}
