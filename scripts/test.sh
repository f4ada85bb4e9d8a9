#!/usr/bin/env bash
# The test command (README, .ci/run): set up, then the C++ tests (GoogleTest via CTest) and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
build=$(ls -d build/cp3*/ | head -n 1)
ctest --test-dir "$build" --output-on-failure -j2 --timeout 300
.venv/bin/python -m pytest -q tests/python "$@"
