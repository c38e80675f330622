#!/usr/bin/env bash
# Session-local GPU step (not committed): build HEAD and the pre-op-record baseline, run the
# suite and the new CUDA autograd tests (plain and under memcheck), and the eager-overhead
# benches of both builds in turns.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"; J=$(nproc)
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/summary.txt"
mkdir -p /tmp/base && tar -xzf data/base_db8dbae.tgz -C /tmp/base
( cmake -S /tmp/base -B /tmp/base/build -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DKILN_NATIVE=ON -DCMAKE_BUILD_TYPE=Release > /dev/null &&
  cmake --build /tmp/base/build -j $((J/2)) --target dispatch_overhead cuda_overhead > "$OUT/base_build.log" 2>&1; echo "base build rc=$?" >> "$OUT/summary.txt" ) &
cmake -S . -B build-gpu -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DKILN_NATIVE=ON -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build-gpu -j $J > "$OUT/build.log" 2>&1; log "head build rc=$? warnings=$(grep -ci warning "$OUT/build.log")"
wait
ctest --test-dir build-gpu -j 16 --output-on-failure > "$OUT/ctest.log" 2>&1; log "ctest rc=$? $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
build-gpu/tests/test_cuda > "$OUT/test_cuda.log" 2>&1; log "test_cuda rc=$? $(grep -E '^\[doctest\] test cases' "$OUT/test_cuda.log")"
build-gpu/tests/test_cuda -tc="*GPU*autograd*,*replay*GPU*,*gradcheck*GPU*,*network*GPU*,*cross devices*" > "$OUT/test_autograd_cuda.log" 2>&1
log "autograd cuda cases rc=$? $(grep -E '^\[doctest\] test cases' "$OUT/test_autograd_cuda.log")"
compute-sanitizer --tool memcheck --leak-check no build-gpu/tests/test_cuda -tc="*replay*GPU*,*gradcheck*GPU*,*network*GPU*,*cross devices*" > "$OUT/memcheck.log" 2>&1
log "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
for round in 1 2; do
  for which in base head; do
    dir=/tmp/base/build; [[ $which == head ]] && dir=build-gpu
    echo "### $which round $round" >> "$OUT/overhead.txt"
    "$dir/bench/dispatch_overhead" >> "$OUT/overhead.txt" 2>&1
    "$dir/bench/cuda_overhead" >> "$OUT/overhead.txt" 2>&1
  done
done
log "overhead done"
