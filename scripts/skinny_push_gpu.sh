#!/usr/bin/env bash
# One GPU-machine pass for the skinny GEMM's pushed partials (SkinnyGemmArgs::push_partials):
# build test_cuda and the skinny_gemm bench, run the pushed-partials test first (a lost byte
# would hang its mbarrier: the timeout says so), the other skinny tests, the bench (target rows
# with "wg+g pushed", the MLP block rows, the graph rows), the trace, then compute-sanitizer's
# memcheck, racecheck and synccheck on the pushed-partials test. Logs in $OUT; summary last.
set -uo pipefail
B=${1:-b}
OUT=${OUT:-push_out}
mkdir -p "$OUT"
S="$OUT/summary.txt"
say() { echo "$*" | tee -a "$S"; }
start=$(date +%s)
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DKILN_NATIVE=ON \
  > "$OUT/build.log" 2>&1 && cmake --build "$B" -j16 --target test_cuda skinny_gemm >> "$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; exit 1; }
say "built at +$(( $(date +%s) - start )) s"
T="$B/tests/test_cuda"
timeout 60 "$T" -tc='*pushed*' > "$OUT/tests.txt" 2>&1; say "pushed test rc $?"
timeout 45 "$T" -tc='*skinny*' -tce='*pushed*' >> "$OUT/tests.txt" 2>&1; say "other skinny tests rc $?"
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader -lms 500 > "$OUT/clocks.txt" 2>&1 &
smi=$!
timeout 110 "$B/bench/skinny_gemm" > "$OUT/bench.txt" 2>&1; say "bench rc $?"
timeout 40 "$B/bench/skinny_gemm" --trace > "$OUT/trace.txt" 2>&1; say "trace rc $?"
kill $smi 2>/dev/null
for tool in memcheck racecheck synccheck; do
  KILN_TEST_CUPTI_TAKEN=1 timeout 50 compute-sanitizer --tool $tool --error-exitcode 9 "$T" -tc='*pushed*' \
    > "$OUT/$tool.txt" 2>&1
  say "$tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool.txt" | tr '\n' ' ')"
done
say "done at +$(( $(date +%s) - start )) s"
grep -E "test cases|assertions|Status" "$OUT/tests.txt" | tee -a "$S"
grep -E "target +(lt|wg)|pushed|mlp block" "$OUT/bench.txt" | grep -vE " s[0-9]" | tee -a "$S"
