#!/usr/bin/env bash
# One GPU-machine call for the cache-missing gather rate (issue 4): build the CUDA variant (as
# scripts/gpu-check.sh does), run the TensorFile/cache tests, then benchmarks/gather_rate.py with rows
# delivered to the CPU and to CUDA, and iobench (the raw device: 4 KiB random, 2 threads x QD128) on
# the same file. Carry .carry (liburing .debs, iobench.c). Output to $OUT (or ./gather-rate-out).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/gather-rate-out}; mkdir -p "$out"
nvidia-smi --query-gpu=name --format=csv,noheader
uring=/tmp/uring; rm -rf $uring && mkdir -p $uring
for f in .carry/liburing*.deb; do dpkg -x "$f" $uring; done
pc=$uring/usr/lib/x86_64-linux-gnu/pkgconfig
sed -i "s|=/usr|=$uring/usr|" $pc/liburing*.pc
export PKG_CONFIG_PATH=$pc LD_LIBRARY_PATH=$uring/usr/lib/x86_64-linux-gnu
gcc -O2 -o /tmp/iobench .carry/iobench.c -I$uring/usr/include -L$uring/usr/lib/x86_64-linux-gnu -luring -lpthread
build=/tmp/gather-rate-build site=/tmp/gather-rate-site  # not gpu-check.sh's dirs: both may run on one machine
rm -rf $build $site
cmake -S . -B $build -G Ninja -DGPUIO_CUDA=ON -DGPUIO_BUILD_PYTHON=ON -DGPUIO_BUILD_TESTS=OFF \
  -DPython_EXECUTABLE="$(command -v python3)" > "$out/build.log" 2>&1 && cmake --build $build -j16 >> "$out/build.log" 2>&1 \
  || { tail -20 "$out/build.log"; exit 1; }
mkdir -p $site && cp -r python/gpuio $site/ && cp $build/cpp/src/bindings/_core*.so $site/gpuio/
export PYTHONPATH=$site PYTHONUNBUFFERED=1
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/python/test_tensor_file.py tests/python/test_cache_store.py \
  tests/python/test_cache_page.py 2>&1 | tail -3
data=/tmp/gr; mkdir -p $data
for dev in cuda cpu; do
  timeout 150 python3 benchmarks/gather_rate.py --workdir $data --device $dev --rows ${ROWS:-100000} --batch ${BATCH:-8192} \
    --repeats ${REPEATS:-5} --json "$out/gather_rate_$dev.json" 2>&1 | tail -15
done
echo "iobench 4 KiB random read, 2 threads x QD128, O_DIRECT io_uring, 4 s:"
/tmp/iobench $data/gather_rate_4096.npy 4096 128 2 4 1 0 0 1
echo "iobench 1 thread x QD128:"; /tmp/iobench $data/gather_rate_4096.npy 4096 128 1 4 1 0 0 1
