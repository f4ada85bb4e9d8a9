#!/usr/bin/env bash
# The public API reference (issue 13): pdoc over the library's public modules, HTML into build/api-docs (or
# $1). The applications (cli, apps, gnn, bench), private modules (gpuio._*) and gpuio.volumes (see below) are
# left out. Fails when pdoc warns (an annotation it cannot read, an __all__ name that does not resolve).
#   scripts/api-docs.sh [OUT_DIR]        Environment: PYTHON (default .venv/bin/python; needs the docs extra)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/api-docs}
py=${PYTHON:-.venv/bin/python}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# gpuio.volumes: its functions named list/lock_owners shadow `list` in annotations pdoc evaluates (to fix there).
"$py" -m pdoc --docformat markdown -o "$out" gpuio '!gpuio\._.*' '!gpuio\.cli' '!gpuio\.apps' '!gpuio\.gnn' \
  '!gpuio\.bench' '!gpuio\.volumes' 2>&1 | tee "$log"
if grep -qi "warn" "$log"; then
  echo "api-docs: pdoc warned (above): fix the docstring or annotation it names" >&2
  exit 1
fi
echo "api-docs: $out/index.html"
