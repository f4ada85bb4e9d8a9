#!/usr/bin/env bash
# The README's main job (`gpuio demo`) for an older tree and this one, built and run on ONE GPU machine,
# alternating old/new, so the machine and its disk are the same for both (issue 13 judges "ratios within noise";
# fresh machines differ by 20 % in disk rate, so runs on different machines cannot tell).
#   here:  git archive <rev> | gzip > .carry/old-<rev>.tgz            (the device tool copies no .git)
#   there: bash scripts/gpu-compare-demo.sh .carry/old-<rev>.tgz [runs per tree, default 2]   (carry [".carry"])
# Each tree is built by its own scripts/gpu-check.sh (GPUIO_STEPS=none); output: one line per run, the epoch table
# row (memory | gpuio | mmap s/epoch) and the headline; details under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
out=${OUT:-$repo/gpu-compare-out}
mkdir -p "$out"
old_tgz=${1:?usage: bash scripts/gpu-compare-demo.sh OLD.tgz [RUNS]}
runs=${2:-2}
[[ -f $old_tgz ]] || { echo "no such archive: $old_tgz"; exit 2; }
old=/tmp/gpuio-old-tree
rm -rf $old && mkdir -p $old && tar -xzf "$old_tgz" -C $old && ln -s "$repo/.carry" $old/.carry

# Both trees' gpu-check.sh build into /tmp/gpuio-build and /tmp/gpuio-site: build the old one, move its site aside.
rm -rf /tmp/gpuio-build /tmp/gpuio-site /tmp/site-old /tmp/site-new
t0=$(date +%s)
(cd $old && GPUIO_STEPS=none OUT=$out/old bash scripts/gpu-check.sh > "$out/old-build.txt" 2>&1) \
  || { tail -20 "$out/old-build.txt"; echo "old tree: build FAILED"; exit 1; }
mv /tmp/gpuio-site /tmp/site-old && rm -rf /tmp/gpuio-build
GPUIO_STEPS=none OUT=$out/new bash scripts/gpu-check.sh > "$out/new-build.txt" 2>&1 \
  || { tail -20 "$out/new-build.txt"; echo "this tree: build FAILED"; exit 1; }
cp -r /tmp/gpuio-site /tmp/site-new
echo "builds: $(( $(date +%s) - t0 )) s; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)"

export LD_LIBRARY_PATH=/tmp/uring/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
status=0
for i in $(seq 1 "$runs"); do
  for which in old new; do
    d=$(mktemp -d /tmp/gpuio-demo-XXXXXX)
    (cd "$d" && PYTHONPATH=/tmp/site-$which timeout 300 python3 -X faulthandler -c "from gpuio.cli import main; main()" demo) \
      > "$out/demo-$which-$i.txt" 2>&1
    rc=$?
    ((rc)) && status=1
    row=$(grep -m1 "epoch s" "$out/demo-$which-$i.txt" | tr -s ' │┃|' ' ')
    echo "$which run $i (rc $rc): memory/gpuio/mmap${row#* epoch s} | $(grep -m1 -E '^gpuio [0-9.]+ s/epoch' "$out/demo-$which-$i.txt")"
    rm -rf "$d"
  done
done
exit $status
