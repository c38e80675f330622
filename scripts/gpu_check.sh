#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, build Kiln's CUDA configuration with Ninja,
# run the whole test suite (the CUDA suite included), run the CUDA test binary under
# compute-sanitizer (memcheck and racecheck), run the benchmarks — side by side with
# LibTorch and PyTorch where they are installed — check the profiler's kernel times against
# Nsight Compute's where ncu is installed, and print one summary table at the end.
#
#   scripts/gpu_check.sh                 # results and logs under $OUT (default gpu-check-out/)
#   CUDA_ARCH=90a BUILD=build-gpu OUT=/tmp/gpu scripts/gpu_check.sh
#
# Exit status: non-zero if the build, a test, a sanitizer run or the ncu agreement check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ARCH=${CUDA_ARCH:-90a}
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-gpu-check-out}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"
declare -a rows
status=0
row() { rows+=("$(printf '%-34s %s' "$1" "$2")"); }
fail() { status=1; row "$1" "FAILED — $2"; }

gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
row "date (UTC)" "$(date -u '+%Y-%m-%d %H:%M')"
row "GPU, driver, memory" "${gpu:-none visible}"
row "nvcc" "$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)"

# 1. Build.
if cmake -S . -B "$BUILD" -G Ninja -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DKILN_NATIVE=ON > "$OUT/configure.log" 2>&1 &&
   cmake --build "$BUILD" -j "$JOBS" > "$OUT/build.log" 2>&1; then
  row "build (sm_$ARCH, Ninja)" "ok, $(grep -ci 'warning' "$OUT/build.log") warning lines"
else
  fail "build (sm_$ARCH, Ninja)" "see $OUT/build.log"
  tail -30 "$OUT/build.log"
  printf '%s\n' "${rows[@]}"
  exit 1
fi

# 2. Every test, through ctest.
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" > "$OUT/ctest.log" 2>&1
ctest_rc=$?
summary=$(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)
skipped=$(grep -c '(Skipped)' "$OUT/ctest.log")
if [[ $ctest_rc -eq 0 ]]; then row "ctest" "$summary; $skipped skipped"; else fail "ctest" "$summary (see $OUT/ctest.log)"; fi
# CTEST_REPEATS=N: the whole suite N more times in a row (scripts/repeat_ctest.sh), the check
# that no test depends on what the other test processes do to the GPU.
if [[ ${CTEST_REPEATS:-0} -gt 0 ]]; then
  repeat=$(scripts/repeat_ctest.sh "$BUILD" "$CTEST_REPEATS" "$JOBS" 2>&1 | tail -1)
  if [[ $repeat == *" runs passed"* ]]; then row "ctest repeated" "${repeat#RESULT repeat_ctest }"; else fail "ctest repeated" "$repeat"; fi
fi
cuda_cases=$("$BUILD/tests/test_cuda" 2>&1 | grep -E '^\[doctest\] test cases' | tail -1)
row "CUDA suite" "${cuda_cases:-did not run}"

# 3. compute-sanitizer on the CUDA suite.
for tool in memcheck racecheck; do
  if command -v compute-sanitizer > /dev/null; then
    # The sanitizer holds CUPTI, so the profiler tests expect its "CPU columns only" fallback
    # (KILN_TEST_CUPTI_TAKEN; see tests/cuda/test_profiler_cuda.cpp). Every test case runs;
    # the two differential tables run the first case of each (op, dtype) and every 8th after
    # it (KILN_TEST_SAMPLE), since all of them take the sanitizers many minutes.
    KILN_TEST_CUPTI_TAKEN=1 KILN_TEST_SAMPLE=8 timeout 300 compute-sanitizer --tool "$tool" "$BUILD/tests/test_cuda" \
      > "$OUT/sanitizer_$tool.log" 2>&1
    rc=$?
    # The allocator's OOM tests make cudaMalloc fail on purpose (and clear the sticky error
    # with cudaGetLastError): the sanitizer lists those API errors. They are expected; any
    # other report (a bad access, a race, another API error) fails the check.
    total=$(grep -oE '(ERROR SUMMARY|RACECHECK SUMMARY): [0-9]+' "$OUT/sanitizer_$tool.log" | grep -oE '[0-9]+$' | tail -1)
    expected=$(grep -c 'Program hit cudaErrorMemoryAllocation' "$OUT/sanitizer_$tool.log")
    if [[ $rc -eq 0 && -n $total && $total -eq 0 ]]; then
      row "compute-sanitizer $tool" "clean: no reports (differential tables sampled 1 in 8)"
    elif [[ $rc -eq 0 && -n $total && $total -eq $expected ]]; then
      row "compute-sanitizer $tool" "clean: $total reports, all deliberate out-of-memory API errors of the OOM tests (differential tables sampled 1 in 8)"
    else
      fail "compute-sanitizer $tool" "${total:-?} reports, ${expected} of them deliberate OOM API errors (exit $rc)"
    fi
  else
    row "compute-sanitizer $tool" "not installed"
  fi
done

# 4. Benchmarks (figures, not pass/fail). The host-bound ones run before cpu_gemm's all-core
# run: processes started right after it measured slow launch floors in earlier checks.
"$BUILD/bench/dispatch_overhead" > "$OUT/cpu_dispatch_overhead.txt" 2>&1
"$BUILD/bench/cuda_overhead" > "$OUT/cuda_overhead_kiln.txt" 2>&1
# profiler_benches [KINETO_BENCH]: Kiln's profiler overhead, then Kineto's when given (so
# that both see one host state), their start-up costs the same way, then what CUPTI alone
# costs a launch on this host. Run with the LibTorch benchmarks when LibTorch is here
# (below), else here.
profiler_benches() {
  "$BUILD/bench/profiler_overhead" > "$OUT/cuda_profiler_overhead_kiln.txt" 2>&1
  if [[ $# -gt 0 ]]; then "$1" > "$OUT/cuda_profiler_overhead_libtorch.txt" 2>&1; fi
  "$BUILD/bench/profiler_startup" > "$OUT/cuda_profiler_startup_kiln.txt" 2>&1
  if [[ $# -gt 0 ]]; then "$1" --startup > "$OUT/cuda_profiler_startup_libtorch.txt" 2>&1; fi
  "$BUILD/bench/cupti_launch_cost" > "$OUT/cuda_cupti_launch_cost.txt" 2>&1
}
have_torch=false
python3 -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null && have_torch=true
$have_torch || profiler_benches
"$BUILD/bench/cpu_gemm" --repeats 3 > "$OUT/cpu_gemm.txt" 2>&1
"$BUILD/bench/alloc_latency" --device cuda > "$OUT/alloc_latency_kiln.txt" 2>&1
# The allocation traces: the committed ones and a Kiln training loop recorded on this GPU.
"$BUILD/bench/record_training_trace" --device cuda --out "$OUT/kiln_training_cuda.trace" > "$OUT/record_training_trace.txt" 2>&1
alloc_traces=(bench/traces/*.trace)
[[ -s "$OUT/kiln_training_cuda.trace" ]] && alloc_traces+=("$OUT/kiln_training_cuda.trace")
"$BUILD/bench/alloc_trace_replay" --device cuda "${alloc_traces[@]}" > "$OUT/alloc_trace_kiln.txt" 2>&1
"$BUILD/bench/cuda_bandwidth" > "$OUT/cuda_bandwidth_kiln.txt" 2>&1
"$BUILD/bench/cuda_gemm" > "$OUT/cuda_gemm_kiln.txt" 2>&1
"$BUILD/bench/cuda_transfer" > "$OUT/cuda_transfer_kiln.txt" 2>&1
if $have_torch; then
  torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  # An install of this CUDA build lets the LibTorch project link Kiln too, for the
  # one-process comparison (side_by_side_cuda_overhead).
  cmake --install "$BUILD" --prefix "$PWD/$BUILD/install" > "$OUT/install.log" 2>&1
  if cmake -S bench/libtorch -B "$BUILD-libtorch" -G Ninja -DCMAKE_PREFIX_PATH="$torch_prefix;$PWD/$BUILD/install" \
       > "$OUT/libtorch_configure.log" 2>&1 &&
     cmake --build "$BUILD-libtorch" -j "$JOBS" > "$OUT/libtorch_build.log" 2>&1; then
    "$BUILD-libtorch/libtorch_alloc_latency" > "$OUT/alloc_latency_libtorch.txt" 2>&1
    "$BUILD-libtorch/libtorch_dispatch_overhead" > "$OUT/cpu_dispatch_overhead_libtorch.txt" 2>&1
    "$BUILD-libtorch/libtorch_cuda_overhead" > "$OUT/cuda_overhead_libtorch.txt" 2>&1
    profiler_benches "$BUILD-libtorch/libtorch_profiler_overhead"
    if [[ -x "$BUILD-libtorch/side_by_side_cuda_overhead" ]]; then
      "$BUILD-libtorch/side_by_side_cuda_overhead" > "$OUT/cuda_overhead_side_by_side.txt" 2>&1
      "$BUILD-libtorch/side_by_side_gemm" > "$OUT/cuda_gemm_side_by_side.txt" 2>&1
      "$BUILD-libtorch/side_by_side_transfer" > "$OUT/cuda_transfer_side_by_side.txt" 2>&1
      # Training (issue 14): a 4-layer MLP step against LibTorch's C++ frontend and PyTorch
      # eager, AdamW against PyTorch's fused kernel.
      "$BUILD-libtorch/side_by_side_train_step" > "$OUT/train_step_side_by_side.txt" 2>&1
      python3 bench/train_step_torch.py >> "$OUT/train_step_side_by_side.txt" 2>&1
      "$BUILD-libtorch/side_by_side_adamw" > "$OUT/adamw_side_by_side.txt" 2>&1
    else
      row "side-by-side overhead" "not built (no Kiln install found; see $OUT/libtorch_configure.log)"
    fi
  else
    row "LibTorch benchmarks" "build failed (see $OUT/libtorch_build.log)"
    profiler_benches
  fi
  BUILD="$BUILD" OUT="$OUT" bash scripts/cross_entropy_bench.sh > "$OUT/cross_entropy_side_by_side.txt" 2>&1
  # Fashion-MNIST against PyTorch, 3 seeds (needs the data: scripts/stage_fashion_mnist.sh
  # here, then the data/ folder carried to the GPU machine).
  if [[ -e data/fashion-mnist/t10k-labels-idx1-ubyte.gz ]]; then
    python3 bench/fashion_mnist_compare.py --kiln "$BUILD/examples/train_fashion_mnist" --data data/fashion-mnist \
      > "$OUT/fashion_mnist_compare.txt" 2>&1
    row "Fashion-MNIST vs PyTorch" "$(grep SUMMARY "$OUT/fashion_mnist_compare.txt")"
  fi
  # Kiln and PyTorch, each with and without expandable segments, one table (a PyTorch
  # subprocess per setting: PYTORCH_CUDA_ALLOC_CONF is read when CUDA starts).
  python3 bench/alloc_trace_compare.py --kiln "$BUILD/bench/alloc_trace_replay" --device cuda "${alloc_traces[@]}" \
    > "$OUT/alloc_trace_compare.txt" 2>&1
  row "allocator traces vs PyTorch" "$(grep -E '^Kiln expandable at or below' "$OUT/alloc_trace_compare.txt" ||
    echo "no result, see $OUT/alloc_trace_compare.txt")"
  python3 bench/torch_cuda_ops.py > "$OUT/cuda_ops_pytorch.txt" 2>&1
fi
row "benchmarks" "$OUT/{cpu,alloc_latency,alloc_trace,cuda}_*.txt"
"$BUILD/examples/memory_fragmentation" --device cuda --svg "$OUT/memory_map_cuda.svg" > "$OUT/memory_fragmentation.txt" 2>&1 ||
  fail "example memory_fragmentation" "see $OUT/memory_fragmentation.txt"

# 5. The profiler's per-kernel durations against Nsight Compute's (within 5% for kernels of
# at least 10 us; scripts/ncu_agreement.sh).
# check_with_ncu NAME SCRIPT KEY WHAT: runs SCRIPT "$BUILD" "$OUT/KEY" into $OUT/KEY.txt and
# makes a row of its "RESULT KEY ..." line (a failure row when it exits non-zero).
check_with_ncu() {
  local name=$1 script=$2 key=$3 what=$4 rc verdict
  "$script" "$BUILD" "$OUT/$key" > "$OUT/$key.txt" 2>&1
  rc=$?
  verdict=$(grep -oE "^RESULT $key .*" "$OUT/$key.txt" | tail -1 | cut -d' ' -f3-)
  if [[ $rc -eq 0 ]]; then
    row "$name" "${verdict} ${what} (see $OUT/$key.txt)"
  else
    fail "$name" "${verdict:-did not run} (exit $rc, see $OUT/$key.txt)"
  fi
}
if command -v ncu > /dev/null; then
  check_with_ncu "profiler kernel times vs ncu" scripts/ncu_agreement.sh ncu_agreement \
    "kernels of >= 10 us within 5%"
  # Kiln's NVTX ranges, seen by a CUDA tool.
  check_with_ncu "NVTX op ranges under ncu" scripts/nvtx_check.sh nvtx_ranges "kernels selected by kiln::addmm ranges"
else
  row "profiler kernel times vs ncu" "ncu not installed"
fi

for f in "$OUT"/cpu_*.txt "$OUT"/alloc_latency_*.txt "$OUT"/alloc_trace_*.txt "$OUT"/cuda_*.txt "$OUT"/ncu_agreement.txt "$OUT"/nvtx_ranges.txt; do
  [[ -f $f ]] && { echo "== $(basename "$f")"; cat "$f"; }
done
# Side-by-side comparisons against the issue's targets, one row each.
while IFS= read -r line; do rows+=("$line"); done < <(python3 scripts/gpu_bench_summary.py "$OUT"/cuda_*.txt)

echo
echo "GPU check summary"
printf '%s\n' "${rows[@]}" | tee "$OUT/summary.txt"
exit $status
