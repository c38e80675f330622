#!/usr/bin/env bash
# One GPU-machine pass for the skinny GEMM (ops/cuda/skinny_gemm.h): build the targets it needs,
# run the benchmark (bench/skinny_gemm.cpp) and the MLP block example, the CUDA tests of the
# skinny GEMM and of the ops routed to it, and compute-sanitizer memcheck on the skinny tests.
# Logs go to $OUT (or ./skinny_out); the last lines printed are the summary.
#
#   scripts/skinny_gemm_gpu.sh [build-dir]
set -uo pipefail
B=${1:-b}
OUT=${OUT:-skinny_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt" 2>&1
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DKILN_NATIVE=ON \
  > "$OUT/build.log" 2>&1 &&
  cmake --build "$B" -j16 --target test_cuda skinny_gemm fused_mlp >> "$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; exit 1; }
echo "== built at $(date +%T)"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw --format=csv,noheader -lms 500 > "$OUT/clocks.txt" 2>&1 &
smi=$!
timeout 80 "$B/bench/skinny_gemm" > "$OUT/bench.txt" 2>&1; echo "bench rc $?"
kill "$smi" 2>/dev/null
timeout 40 "$B/examples/fused_mlp" --dtype bfloat16 --batch 64 --iterations 200 > "$OUT/mlp.txt" 2>&1
echo "fused_mlp rc $?"
timeout 100 "$B/tests/test_cuda" -tc='*skinny*,*fused_linear_gelu*,*linear*,*gemm*' > "$OUT/tests.log" 2>&1
echo "tests rc $?"
KILN_TEST_CUPTI_TAKEN=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tests/test_cuda" \
  -tc='*skinny*' -tce='*float64*' > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?"
echo "== done at $(date +%T)"
tail -4 "$OUT/tests.log"
tail -3 "$OUT/memcheck.log"
grep -E "target|ratios|mlp block" "$OUT/bench.txt"
grep -iE "graph|latency|us" "$OUT/mlp.txt" | tail -12
