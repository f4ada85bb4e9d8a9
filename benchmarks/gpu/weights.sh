# Model weights into GPU memory (sourced by scripts/gpu.sh): gpuio.safetensors beside safetensors, fastsafetensors,
# Run:ai's streamer and InstantTensor. The peers come as wheels in .whl/ (safetensors, fastsafetensors, runai-model-streamer,
# humanize, instanttensor: `gpu.sh weights-wheels` says which are missing; docs/BENCHMARKS.md "Model weights"), installed
# by the prologue. GPUIO_DEVICE=fast puts the files on the fast device (lib.sh).

# the peers' wheels the weights suites load (name==version: module), checked in .whl/ and in $py
WEIGHTS_WHEELS="safetensors==0.8.0:safetensors fastsafetensors==0.5.0:fastsafetensors \
runai-model-streamer==0.17.1:runai_model_streamer humanize:humanize instanttensor==0.2.2:instanttensor"

# weights_wheels: one line, which of WEIGHTS_WHEELS $py lacks and .whl/ does not carry, and the command that fetches them
weights_wheels() {
  local w spec mod name ver file missing=() have=()
  for w in $WEIGHTS_WHEELS; do
    spec=${w%%:*} mod=${w##*:} name=${spec%%==*} ver=""; [[ $spec == *==* ]] && ver=${spec##*==}
    if [[ -n $ver ]]; then file=$(ls "$repo/.whl/${name//-/_}-$ver"-*.whl 2>/dev/null | head -1)
    else file=$(ls "$repo/.whl/${name//-/_}"-[0-9]*.whl 2>/dev/null | head -1); fi
    if [[ -n $file ]]; then have+=("$(basename "$file")")
    elif ((!GPU_DRY)) && "$py" -c "import $mod, sys; v = getattr($mod, '__version__', ''); sys.exit(0 if not '$ver' or v == '$ver' else 1)" 2>/dev/null; then
      have+=("$spec (installed)")
    else missing+=("$spec"); fi
  done
  if ((${#missing[@]})); then
    echo "weights wheels: MISSING in .whl/: ${missing[*]} (fetch: pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform any -d .whl ${missing[*]}); there: ${have[*]:-none}"
  else echo "weights wheels: all there: ${have[*]}"; fi
}

suite weights-wheels none "one line: the wheels the weights suites need in .whl/ (safetensors, fastsafetensors, \
runai-model-streamer, humanize, instanttensor), which are missing, and the pip download line that fetches them"
suite_weights_wheels() { run true; note "$(weights_wheels)"; }

weights_dir() { on "${GPUIO_WEIGHTS_DIR:-/var/tmp/gpuio-weights}"; }  # on the device of the pass (lib.sh `on`)

suite weights build "model weights, one GPU: the GPU tests of tests/python/weights (pytest -m gpu), then \
benchmarks/model_load.py on a \
GPUIO_WEIGHTS_GIB=8.25 GiB GPT-shaped file written by safetensors: each load in its own process, cold (caches dropped) \
and warm, 2 rounds rotated, saves from CUDA fsynced, gpuio's file loaded by the peers, the raw device on the same file; \
one table of ratios (GPUIO_WEIGHTS_ARGS: more arguments, e.g. --gpuio-variants threads=16; GPUIO_WEIGHTS_DIR)"
suite_weights() {
  local status=0 limit budget
  note "[$suite] $(weights_wheels)"
  TEST_GPU_TIMEOUT_S=60 GPUIO_TAIL=8 bounded pytest-weights 120 "$py" -m pytest -q -p no:cacheprovider \
    -m gpu tests/python/weights -rs || status=1
  limit=$(within 500 25)
  budget=$(( limit > 300 ? limit - 160 : limit / 2 ))  # no new pass after this: the saves and the table fit after it
  GPUIO_TAIL=40 bounded model-load "$limit" "$py" benchmarks/model_load.py --size-gib "${GPUIO_WEIGHTS_GIB:-8.25}" \
    --dir "$(weights_dir)" --json "$OUT/$suite/model_load.json" --budget-s "$budget" ${GPUIO_WEIGHTS_ARGS:-} || status=1
  ((GPU_DRY)) || grep -E "^(cold|warm|save): gpuio" "$(log_of model-load)" | tee -a "$summary"
  return $status
}

suite weights-ranks build "model weights, two GPUs (nvidia-h100-x2): benchmarks/model_load_ranks.py, each rank \
loading half of the tensors of a sharded checkpoint (4 shards + index, GPUIO_WEIGHTS_GIB=8.25 GiB) onto its own GPU, \
gpuio beside safetensors, cold and warm"
suite_weights_ranks() {
  GPUIO_TAIL=20 bounded model-load-ranks "$(within 480 25)" "$py" benchmarks/model_load_ranks.py --ranks 2 \
    --size-gib "${GPUIO_WEIGHTS_GIB:-8.25}" --dir "$(weights_dir)-ranks" --json "$OUT/$suite/model_load_ranks.json"
  local rc=$?
  ((GPU_DRY)) || grep -E "^(cold|warm): gpuio" "$(log_of model-load-ranks)" | tee -a "$summary"
  return $rc
}

suite weights-dist build "one checkpoint onto every GPU of the host (GPUIO_WEIGHTS_RANKS, default all it has; 1 runs \
the single-rank path): benchmarks/model_load_ranks.py --pattern all (every rank takes the whole sharded checkpoint, \
4 shards + index, GPUIO_WEIGHTS_GIB=8.25 GiB), then --pattern share (each its 1/ranks): gpuio alone, gpuio with a \
process group (each byte read once, the rest over NCCL), safetensors, InstantTensor with a process group (all \
only); cold and warm, one round (GPUIO_DEVICE=both: on the disk, then on the fast device)"
suite_weights_dist() {
  local status=0 ranks pattern
  ranks=${GPUIO_WEIGHTS_RANKS:-$( ((GPU_DRY)) && echo 2 || "$py" -c "import torch; print(torch.cuda.device_count())")}
  for pattern in all share; do
    GPUIO_TAIL=20 bounded "model-load-dist-$pattern" "$(within 280 25)" "$py" benchmarks/model_load_ranks.py \
      --ranks "$ranks" --pattern "$pattern" --rounds 1 --size-gib "${GPUIO_WEIGHTS_GIB:-8.25}" \
      --dir "$(weights_dir)-dist" --json "$OUT/$suite/model_load_ranks_$pattern.json" || status=1
    ((GPU_DRY)) || grep -E "^(cold|warm): gpuio" "$(log_of "model-load-dist-$pattern")" | sed "s/^/$pattern, $ranks ranks: /" \
      | tee -a "$summary"
  done
  return $status
}

suite hf build "a transformers model ready on the GPU: benchmarks/hf_load.py, gpuio.safetensors.from_pretrained \
beside LlamaForCausalLM.from_pretrained (device_map=cuda:0), a GPUIO_HF_PARAMS_B=3 B-parameter Llama-shaped bf16 \
model written sharded by save_pretrained, each load in its own process, cold (caches dropped) and warm, 2 rounds \
rotated, logits compared bit for bit, misaligned tensors counted (GPUIO_HF_DIR; GPUIO_HF_ARGS: more arguments, e.g. \
--read-alone: load_file of the same checkpoint by itself beside them, its rate in the table)"
suite_hf() {
  local limit
  limit=$(within 540 25)
  GPUIO_TAIL=16 bounded hf-load "$limit" "$py" benchmarks/hf_load.py --params-b "${GPUIO_HF_PARAMS_B:-3}" \
    --dir "$(on "${GPUIO_HF_DIR:-/var/tmp/gpuio-hf}")" --json "$OUT/$suite/hf_load.json" \
    --budget-s $(( limit > 120 ? limit - 90 : limit / 2 )) ${GPUIO_HF_ARGS:-}
  local rc=$?
  ((GPU_DRY)) || grep -E "^(cold|warm): (gpuio|the read alone)" "$(log_of hf-load)" | tee -a "$summary"
  return $rc
}
