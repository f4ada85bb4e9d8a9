#!/usr/bin/env bash
# The main job on a fresh machine: set up, then `gpuio demo` in the current directory.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bash "$repo/scripts/setup.sh"
exec "$repo/.venv/bin/gpuio" demo "$@"
