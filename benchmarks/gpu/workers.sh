# PyTorch DataLoader workers (sourced by scripts/gpu.sh): the GPU pattern's tests (sampling in workers, the gather
# through the main process's CUDA caches), the loader benchmark over a table 4x the memory given, and the demo with
# its sampling in worker processes. benchmarks/loader_workers.py makes its own memory cgroup (v2 here).

suite workers build "DataLoader workers: the GPU tests of tests/python/loader (pytest -m gpu), then \
benchmarks/loader_workers.py \
(0, 1, 2, 4 workers x fork, spawn, forkserver; gpuio TensorFile beside np.memmap in the same workers; a table 4 x \
the memory given, in its own memory cgroup; GPUIO_WORKERS_ARGS, default --memory-mib 2048 --batch-rows 4096 --pass-s 1.5; \
GPUIO_WORKERS_TESTS=0 skips the pytest part)"
suite_workers() {
  local status=0 dir; dir=$(on /var/tmp/gpuio-loader-workers)
  if [[ ${GPUIO_WORKERS_TESTS:-1} != 0 ]]; then
    TEST_GPU_TIMEOUT_S=90 GPUIO_TAIL=8 bounded pytest-loader-workers 180 "$py" -m pytest -q -p no:cacheprovider \
      -m gpu tests/python/loader -rs || status=1
  fi
  run mkdir -p "$dir"
  GPUIO_TAIL=24 bounded loader-workers "$(within 330 20)" "$py" benchmarks/loader_workers.py --parts loader \
    ${GPUIO_WORKERS_ARGS:---memory-mib 2048 --batch-rows 4096 --pass-s 1.5} --workdir "$dir" \
    --json "$OUT/$suite/loader_workers.json" || status=1
  ((GPU_DRY)) || grep -E "^judged:" "$(log_of loader-workers)" | tee -a "$summary"
  run rm -f "$dir/gpuio-loader-workers.npy"
  return $status
}

suite workers-demo build "gpuio demo with its sampling in 2 worker processes vs in the loader's thread \
(benchmarks/loader_workers.py --parts demo: --sample-workers 0, 2, 0, each run a process of its own, in an empty \
directory; the demo's GPU defaults)"
suite_workers_demo() {
  local d rc
  d=$(tmp_root)/gpuio-workers-demo-XXXXXX
  ((GPU_DRY)) || d=$(mktemp -d "$d")
  GPUIO_TAIL=8 bounded workers-demo "$(within 420 20)" "$py" benchmarks/loader_workers.py --parts demo --workdir "$d" \
    --json "$OUT/$suite/loader_workers_demo.json"
  rc=$?
  ((GPU_DRY)) || grep -E "^demo" "$(log_of workers-demo)" | tee -a "$summary"
  run rm -rf "$d"
  return $rc
}
