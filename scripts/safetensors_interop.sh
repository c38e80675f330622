#!/usr/bin/env bash
# Safetensors interop between Kiln and PyTorch, both ways (scripts/safetensors_interop.py says
# what is checked): builds the Kiln side (tests/interop/safetensors_interop.cpp) in BUILD_DIR
# and runs the Python side with PYTHON. On a GPU machine Kiln's CUDA device is checked too.
# The last line is "safetensors_interop: PASS" or "... FAIL"; the exit code follows it.
#
#   scripts/safetensors_interop.sh                 (BUILD_DIR=build, PYTHON=python3)
#   BUILD_DIR=build-x PYTHON=/usr/bin/python3 scripts/safetensors_interop.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
python=${PYTHON:-python3}
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "safetensors_interop: $python has no torch; nothing to compare against" >&2
  echo "safetensors_interop: FAIL (no torch)"
  exit 1
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G "$(command -v ninja >/dev/null && echo Ninja || echo 'Unix Makefiles')" -DKILN_NATIVE=ON
fi
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target safetensors_interop
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln_safetensors_interop.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$python" scripts/safetensors_interop.py --kiln "$build/tests/safetensors_interop" --dir "$work"
