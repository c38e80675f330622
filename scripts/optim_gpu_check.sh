#!/usr/bin/env bash
# The optimizer checks that need a GPU (issue 14, part 3), for a build that scripts/gpu_check.sh
# (or cmake by hand) has made: the CUDA test cases of tests/cuda/test_optimizer_cuda.cpp, the
# same under compute-sanitizer memcheck and racecheck when installed, the fused-AdamW
# benchmarks of Kiln (bench/fused_adamw) and PyTorch (bench/fused_adamw_torch.py), and the
# one-process comparison with LibTorch (side_by_side_adamw) when bench/libtorch was built.
#
#   scripts/optim_gpu_check.sh [BUILD] [LIBTORCH_BUILD]     # defaults: build-gpu, BUILD-libtorch
#
# Exit status: non-zero if a test or a sanitizer run failed (benchmarks only print).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
LIBTORCH_BUILD=${2:-$BUILD-libtorch}
status=0
cmake --build "$BUILD" --target test_cuda fused_adamw || exit 1

echo "== tests/cuda/test_optimizer_cuda.cpp"
"$BUILD/tests/test_cuda" --source-file='*test_optimizer_cuda*' || status=1
if command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer $tool"
    compute-sanitizer --tool "$tool" --error-exitcode 1 "$BUILD/tests/test_cuda" --source-file='*test_optimizer_cuda*' \
      || status=1
  done
fi

echo "== benchmarks"
"$BUILD/bench/fused_adamw"
if python3 -c 'import torch' 2> /dev/null; then python3 bench/fused_adamw_torch.py; fi
if [[ -x "$LIBTORCH_BUILD/side_by_side_adamw" ]]; then
  "$LIBTORCH_BUILD/side_by_side_adamw"
else
  echo "side_by_side_adamw: not built ($LIBTORCH_BUILD; scripts/gpu_check.sh configures bench/libtorch there)"
fi
exit $status
