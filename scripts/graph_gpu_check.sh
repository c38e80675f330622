#!/usr/bin/env bash
# Issue 15's GPU check in one call: build (sm_90a), the CPU and CUDA suites, compute-sanitizer
# over the fused op and the CUDA graph tests, the fused op's benchmark, fused_mlp, the compiled
# Fashion-MNIST run against the eager one (when data/fashion-mnist is staged), and PyTorch's
# side of the benchmarks in the same run. Results under $OUT (at most 8 files).
#   OUT=/tmp/o scripts/graph_gpu_check.sh [quick]
set -u
OUT=${OUT:-/tmp/graph-gpu}
mkdir -p "$OUT"
B=build-gpu
S=$OUT/summary.txt
: > "$S"
say() { echo "$*" | tee -a "$S"; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader >> "$S" 2>&1
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DKILN_NATIVE=ON > "$OUT/build.log" 2>&1 &&
  timeout 300 cmake --build $B -j 16 >> "$OUT/build.log" 2>&1
say "build rc=$? warnings=$(grep -c 'warning' "$OUT/build.log")"
grep -E "error|warning" "$OUT/build.log" | head -20 >> "$S"
(cd $B && timeout 240 ctest -j 12 --output-on-failure -E '^cuda$' > "$OUT/ctest.log" 2>&1); say "ctest rc=$? $(grep 'tests passed' "$OUT/ctest.log")"
grep -E "Failed|\*\*\*" "$OUT/ctest.log" | head >> "$S"
timeout 300 $B/tests/test_cuda > "$OUT/test_cuda.log" 2>&1; say "test_cuda rc=$? $(grep -E 'test cases:' "$OUT/test_cuda.log")"
grep -B2 -A6 "ERROR" "$OUT/test_cuda.log" | head -60 >> "$S"
if [ "${1:-}" != quick ]; then
  KILN_TEST_CUPTI_TAKEN=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/test_cuda \
    -tc="*fused_linear_gelu*,*CudaGraph*,*captured*,*CUDA graph*,*sm90*" > "$OUT/sanitizer.log" 2>&1
  say "compute-sanitizer rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -1)"
fi
timeout 120 $B/bench/fused_linear_gelu > "$OUT/bench.txt" 2>&1; say "bench fused_linear_gelu rc=$?"
timeout 120 $B/examples/fused_mlp --dot-dir "$OUT" >> "$OUT/bench.txt" 2>&1; say "fused_mlp rc=$?"
tail -12 "$OUT/bench.txt" >> "$S"
PYTHONUNBUFFERED=1 timeout 240 python3 bench/torch_fused_mlp.py ${TORCH_COMPILE:+--compile --compile-modes $TORCH_COMPILE} \
  >> "$OUT/bench.txt" 2>&1; say "torch_fused_mlp rc=$?"
# The compiled training step against LibTorch's eager step (one process, in turns).
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
if [ -n "$torch_prefix" ] && cmake --install $B --prefix "$PWD/$B/install" > "$OUT/libtorch.log" 2>&1 &&
   cmake -S bench/libtorch -B $B-libtorch -G Ninja -DCMAKE_PREFIX_PATH="$torch_prefix;$PWD/$B/install" >> "$OUT/libtorch.log" 2>&1 &&
   timeout 200 cmake --build $B-libtorch -j 16 --target side_by_side_train_step side_by_side_fused_mlp >> "$OUT/libtorch.log" 2>&1; then
  timeout 200 $B-libtorch/side_by_side_fused_mlp --dtype all >> "$OUT/bench.txt" 2>&1
  say "side_by_side_fused_mlp rc=$?"; grep -A8 '^dtype' "$OUT/bench.txt" | tail -9 >> "$S"
  for batch in 64 256; do
    timeout 60 $B-libtorch/side_by_side_train_step --batch $batch --rounds 9 >> "$OUT/bench.txt" 2>&1
    say "train step batch $batch: $(grep -E 'RESULT' "$OUT/bench.txt" | tail -5 | tr '\n' ' ')"
  done
else
  say "libtorch side-by-side: build failed (libtorch.log)"; tail -20 "$OUT/libtorch.log" >> "$S"
fi
if [ -e data/fashion-mnist/t10k-labels-idx1-ubyte.gz ]; then
  for mode in eager compile; do
    flag=""; [ $mode = compile ] && flag=--compile
    timeout 120 $B/examples/train_fashion_mnist --data data/fashion-mnist --epochs 2 --batch 64 --schedule constant \
      --checkpoint /tmp/fm_$mode.safetensors $flag > "$OUT/fm_$mode.log" 2>&1
    say "fashion-mnist $mode rc=$? $(grep RESULT "$OUT/fm_$mode.log")"
  done
fi
cat "$S"
