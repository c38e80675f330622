#!/usr/bin/env bash
# One GPU-machine pass for the skinny GEMM (ops/cuda/skinny_gemm.h, both kernels): build the
# targets it needs (test_cuda, skinny_gemm, fused_mlp), run the benchmark (bench/skinny_gemm.cpp)
# and the MLP block example, the CUDA tests of the skinny GEMM and of the ops routed to it, and
# compute-sanitizer memcheck on the skinny tests. Steps run in order of importance, each capped
# by what is left of a budget (SKINNY_BUDGET_S, default 300 s), so a short lease still returns
# the benchmark. Logs go to $OUT (or ./skinny_out); the last lines printed are the summary.
#
#   scripts/skinny_gemm_gpu.sh [build-dir]
# (Executables built on the development machine do not run there: its image has no libdnnl.)
set -uo pipefail
B=${1:-b}
OUT=${OUT:-skinny_out}
BUDGET=${SKINNY_BUDGET_S:-300}
START=$(date +%s)
mkdir -p "$OUT"
left() { echo $((BUDGET - ($(date +%s) - START))); }
# cap N: N seconds, or what is left of the budget if less (at least 5)
cap() { local l; l=$(left); [ "$l" -lt "$1" ] && echo $((l > 5 ? l : 5)) || echo "$1"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt" 2>&1
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DKILN_NATIVE=ON \
  > "$OUT/build.log" 2>&1 &&
  cmake --build "$B" -j16 --target test_cuda skinny_gemm fused_mlp >> "$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; exit 1; }
echo "== built at +$(( $(date +%s) - START )) s"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw --format=csv,noheader -lms 500 > "$OUT/clocks.txt" 2>&1 &
smi=$!
timeout "$(cap 100)" "$B/bench/skinny_gemm" > "$OUT/bench.txt" 2>&1; echo "bench rc $?"
kill "$smi" 2>/dev/null
timeout "$(cap 40)" "$B/examples/fused_mlp" --dtype bfloat16 --batch 64 --iterations 200 > "$OUT/mlp.txt" 2>&1
echo "fused_mlp rc $?"
timeout "$(cap 120)" "$B/tests/test_cuda" -tc='*skinny*,*fused_linear_gelu*,*linear*,*gemm*' > "$OUT/tests.log" 2>&1
echo "tests rc $?"
KILN_TEST_CUPTI_TAKEN=1 timeout "$(cap 100)" compute-sanitizer --tool memcheck --error-exitcode 9 \
  "$B/tests/test_cuda" -tc='*skinny*' -tce='*float64*' > "$OUT/memcheck.log" 2>&1
echo "memcheck rc $?"
echo "== done at +$(( $(date +%s) - START )) s"
grep -E "passed|failed|skipped|Status" "$OUT/tests.log" | tail -4
grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log" | tail -3
grep -E "target|ratios|mlp block" "$OUT/bench.txt" | grep -vE " s[0-9]| wk[0-9]" 
grep -iE "graph|latency|us" "$OUT/mlp.txt" | tail -8
