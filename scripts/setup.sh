#!/usr/bin/env bash
# Set up this checkout on a fresh Debian/Ubuntu machine:
#   1. system packages (C++ toolchain, CMake, pkg-config, liburing-dev, GoogleTest): installed with apt-get
#      when run as root, otherwise the exact missing packages are printed and the script stops;
#   2. a virtual environment in .venv (sees the system's site-packages, so a preinstalled PyTorch is reused);
#   3. gpuio installed into it, editable, the C++ built once under build/ (GoogleTest too for the tests).
# Usage (the README's two commands, and .ci/run's):
#   bash scripts/setup.sh demo [ARGS...]   set up, then `gpuio demo ARGS...` in the current directory
#   bash scripts/setup.sh test [ARGS...]   set up the test build, then the C++ tests (CTest) and pytest ARGS...
#   bash scripts/setup.sh [--test]         set up only (--test: the test build)
# Environment: GPUIO_CUDA=AUTO|ON|OFF (default AUTO), PYTHON (default python3)
set -euo pipefail
caller_dir=$(pwd)
cd "$(dirname "$0")/.."
repo=$(pwd)
mode=setup
case "${1:-}" in
  demo|test) mode=$1; shift ;;
  --test) mode=setup-test; shift ;;
  "") ;;
  *) echo "setup: unknown mode '$1' (demo, test, --test, or nothing)" >&2; exit 2 ;;
esac
want_tests=0
[[ $mode == test || $mode == setup-test ]] && want_tests=1

packages=(g++ cmake pkg-config liburing-dev python3-venv)
((want_tests)) && packages+=(libgtest-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) == 0 ]]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: run: sudo apt-get install -y ${missing[*]}   (then run this script again)" >&2
    exit 1
  fi
fi

# Ceph, optional (gpuio volumes): librbd/librados for the rbd backend (built when found), the daemons for
# `gpuio cluster up` and the volume tests, fio for benchmarks/volumes_bench.py. Installed as root (~30 s);
# otherwise gpuio builds without the rbd backend and the volume tests skip, saying why.
ceph_packages=(ceph-mon ceph-osd ceph-mgr ceph-common librados-dev librbd-dev python3-rados python3-rbd fio)
ceph_missing=()
for p in "${ceph_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || ceph_missing+=("$p")
done
if ((${#ceph_missing[@]})); then
  if [[ $(id -u) == 0 ]]; then
    echo "setup: installing Ceph: ${ceph_missing[*]}"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${ceph_missing[@]}" >/dev/null; } || echo "setup: Ceph packages could not be installed; volumes stay off" >&2
  else
    echo "setup: note: without ${ceph_missing[*]} gpuio volumes (rbd backend, gpuio cluster) are off" >&2
  fi
fi

python=${PYTHON:-python3}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { echo "setup: Python >= 3.10 needed" >&2; exit 1; }
[[ -x .venv/bin/python ]] || "$python" -m venv --system-site-packages .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
.venv/bin/python -c 'import scikit_build_core, nanobind' 2>/dev/null || "${pip[@]}" "scikit-build-core>=0.10" "nanobind>=2.0"
if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
  # The CPU build where the package index has it (CI); otherwise whatever torch the index offers.
  "${pip[@]}" torch==2.13.0 2>/dev/null || "${pip[@]}" torch
fi
extras="torch,pyg,plot"
((want_tests)) && extras="test"
GPUIO_BUILD_TESTS=$([[ $want_tests == 1 ]] && echo ON || echo OFF) \
  "${pip[@]}" --no-build-isolation -e ".[${extras}]"
echo "setup: ok ($(.venv/bin/python -c 'import gpuio._core as c; print("CUDA layer built" if c.cuda_built else "CPU-only build")'))"
case $mode in
  demo)  # in the directory it was called from: the demo writes its data file there
    cd "$caller_dir" && exec "$repo/.venv/bin/gpuio" demo "$@" ;;
  test)
    build=$(ls -d build/cp3*/ | head -n 1)
    ctest --test-dir "$build" --output-on-failure -j2 --timeout 300
    exec .venv/bin/python -m pytest -q tests/python "$@" ;;
esac
