# Suites of scripts/gpu.sh (sourced): the engine where the disk cannot hide it (benchmarks/engine_ceiling.py over N
# emulated devices, 4 KiB random reads, host and GPU memory; BENCHMARKS.md "When the device is no longer the bound").

suite ceiling build "the engine's ceiling: N = 1..16 emulated devices (null, sim, paced, /dev/shm) x workers, into \
host and GPU memory, the controller beside the best hand-picked count, one-block latency vs pread; then the \
12-device GPU point with the gather kernel (GPUIO_CEILING_ARGS, GPUIO_CEILING_COPY=batch, GPUIO_CEILING_INFLIGHT=4)"
suite_ceiling() {
  local lat status=0
  lat=$(data_file)
  ((GPU_DRY)) || [[ -f $lat ]] || lat=$(on "$repo/gpuio-ceiling-lat.bin")
  # 4 batches in flight: with 2, ordered GPU reads of sim/paced devices idled at each batch's tail
  BOUNDED_SHOW="^SKIP|^host:|^sim backend's own cost|^\| |^JUDGED|^controller|^latency|^wall time|FAILED|Error|Traceback" \
    bounded ceiling 470 "$py" benchmarks/engine_ceiling.py --kinds paced,null,sim,shm-uring --dests gpu,host \
    --seconds 0.3 --inflight "${GPUIO_CEILING_INFLIGHT:-4}" --latency-file "$lat" --copy "${GPUIO_CEILING_COPY:-batch}" \
    --json "$OUT/$suite/ceiling.json" ${GPUIO_CEILING_ARGS:-} || status=1
  # is the copy engine the bound at 12 devices? The same point with the gather kernel (uses SMs: reported)
  BOUNDED_SHOW="^JUDGED|Error|Traceback" bounded ceiling-kernel-copy 60 "$py" benchmarks/engine_ceiling.py --kinds null,sim \
    --dests gpu --devices 12 --workers 4,6 --seconds 0.3 --inflight "${GPUIO_CEILING_INFLIGHT:-4}" --copy kernel \
    --sections grid --json "$OUT/$suite/ceiling-kernel-copy.json" || status=1
  return $status
}

suite scaling build "scaling efficiency into GPU memory over N = 1..12 emulated devices, <= 6 workers, 0 SMs: \
paced-null (the judged kind: a device's own latency and link rate, no host work), paced, null (GPUIO_SCALING_ARGS)"
suite_scaling() {
  BOUNDED_SHOW="^SKIP|^host:|^\| |^JUDGED|^wall time|FAILED|Error|Traceback" bounded scaling 400 "$py" \
    benchmarks/engine_ceiling.py --kinds paced-null,paced,null --dests gpu --devices 1,4,8,12 --workers 1,2,3,4,6 \
    --seconds 0.4 --inflight 4 --copy batch --sections grid --json "$OUT/$suite/scaling.json" ${GPUIO_SCALING_ARGS:-}
}

suite controller build "the engine's own worker count (CAM's controller) for N = 1..16 sim and /dev/shm devices \
beside the best hand-picked count, judged on 1-second re-measurements (GPUIO_CONTROLLER_ARGS)"
suite_controller() {
  BOUNDED_SHOW="^controller |^\| kind \| dest \| N \| chosen|^\| (sim|shm)|^JUDGED|^wall time|Error|Traceback" \
    bounded controller 330 "$py" benchmarks/engine_ceiling.py --kinds sim,shm-uring --dests host --devices 1,4,8,12,16 \
    --workers 1,2,3,4,5,6,7,8 --sections grid,controller --seconds 0.3 --judge-seconds 1 --inflight 2 \
    --json "$OUT/$suite/controller.json" ${GPUIO_CONTROLLER_ARGS:-}
}
