# Sourced (not run) by the one-purpose GPU-machine scripts (gpu-ceiling.sh, gpu-controller.sh, gpu-graph.sh), from
# the repository root with $repo and $out set: reuse the CUDA build scripts/gpu-check.sh leaves in /tmp (made first,
# with GPUIO_STEPS=none and the carried .carry/ inputs, when missing), rebuild what this tree changed, put that gpuio
# on PYTHONPATH and the carried liburing on LD_LIBRARY_PATH. Sets build, site, uring; prints the build time.
build=/tmp/gpuio-build
site=/tmp/gpuio-site
uring=/tmp/uring
if [[ ! -f $build/cpp/libgpuio.a || ! -d $site/gpuio ]]; then
  GPUIO_STEPS=none bash scripts/gpu-check.sh > "$out/gpu-check-build.txt" 2>&1 || { tail -20 "$out/gpu-check-build.txt"; exit 1; }
fi
t0=$(date +%s)
cmake --build $build -j16 > "$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }  # this tree's changes
rm -rf $site/gpuio && cp -r python/gpuio $site/ && cp $build/cpp/src/bindings/_core*.so $site/gpuio/
echo "build: $(( $(date +%s) - t0 )) s; cpus: $(nproc)"
export PYTHONPATH=$site:$repo/tests/python
export LD_LIBRARY_PATH=$uring/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
