#!/usr/bin/env bash
# Runs one command on the GPU machine with a time bound; on a hang it prints the native stacks of every
# thread (cuda-gdb: the GPU machine has no gdb) and the Python stacks (SIGABRT -> faulthandler), then kills it.
#   bash scripts/gpu-bounded.sh SECONDS NAME CMD...      (output: the command's last lines; full log in $OUT/NAME.log)
# Used by scripts/gpu-diag.sh; any GPU call can use it for a step that might hang.
set -u
secs=$1 name=$2; shift 2
out=${OUT:-/tmp}
log=$out/$name.log
export PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1
setsid "$@" > "$log" 2>&1 &
pid=$!
for ((i = 0; i < secs * 5; i++)); do
  kill -0 $pid 2>/dev/null || break
  sleep 0.2
done
if kill -0 $pid 2>/dev/null; then
  echo "[$name] HUNG after ${secs} s: native stacks of pid $pid (and children)"
  for p in $pid $(pgrep -P $pid); do
    # a python child under `timeout`/bash is the one that matters: take every process of the group
    timeout 60 cuda-gdb -p "$p" -batch -ex "thread apply all bt 14" 2>&1 \
      | grep -E "^Thread|^#" | grep -vE "in (clone|start_thread)" | head -80
  done
  kill -ABRT -- -$pid 2>/dev/null; sleep 2; kill -KILL -- -$pid 2>/dev/null
  wait $pid 2>/dev/null
  echo "[$name] python stacks / last output:"; tail -60 "$log"
  exit 124
fi
wait $pid; rc=$?
tail -${GPUIO_TAIL:-12} "$log"
echo "[$name] rc=$rc"
exit $rc
