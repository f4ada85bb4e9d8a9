#!/usr/bin/env bash
# The public API reference (issue 13): pdoc over the library's public modules, HTML into build/api-docs (or
# $1). The applications (cli, apps, gnn, bench) and private modules (gpuio._*) are left out. Fails when pdoc
# warns (an annotation it cannot read, an __all__ name that does not resolve).
#   scripts/api-docs.sh [OUT_DIR]        Environment: PYTHON (default .venv/bin/python; needs the docs extra)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/api-docs}
py=${PYTHON:-.venv/bin/python}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$py" -m pdoc --docformat markdown -o "$out" gpuio '!gpuio\._.*' '!gpuio\.cli' '!gpuio\.apps' '!gpuio\.gnn' \
  '!gpuio\.bench' 2>&1 | tee "$log"
if grep -qi "warn" "$log"; then
  echo "api-docs: pdoc warned (above): fix the docstring or annotation it names" >&2
  exit 1
fi
echo "api-docs: $out/index.html"
