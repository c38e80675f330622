#!/usr/bin/env bash
# One GPU-machine call for the lead's session checks: build (sm_90a, oneDNN from a carried
# .deps/dnnl.tar.xz when present), the whole CUDA suite, compute-sanitizer memcheck over the
# fused op / CUDA graph / skinny cases, LibTorch's side-by-side MLP block, and issue 17's CPU
# comparison on the host's cores (cpu_vs_torch.py with the Fashion-MNIST epoch row,
# cpu_elementwise_vs_torch.py). Results under $OUT (summary.txt first).
#   OUT=/tmp/o STEPS="cuda sanitize mlp cpu" scripts/session_gpu_check.sh
set -u
OUT=${OUT:-/tmp/session-gpu}
STEPS=${STEPS:-"cuda sanitize mlp cpu"}
mkdir -p "$OUT"
B=build-gpu
S=$OUT/summary.txt
: > "$S"
say() { echo "$*" | tee -a "$S"; }
has() { [[ " $STEPS " == *" $1 "* ]]; }
say "start $(date +%T) steps: $STEPS"
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total,driver_version --format=csv,noheader >> "$S" 2>&1
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-200 >> "$S"
dnnl_flags=()
if [ -e .deps/dnnl.tar.xz ]; then
  tar xJf .deps/dnnl.tar.xz -C /tmp && export LD_LIBRARY_PATH=/tmp/dnnl_pkg/lib:${LD_LIBRARY_PATH:-}
  dnnl_flags=(-DCMAKE_PREFIX_PATH=/tmp/dnnl_pkg -DKILN_ONEDNN=ON)
fi
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DKILN_NATIVE=ON "${dnnl_flags[@]}" \
  > "$OUT/build.log" 2>&1 && timeout 300 cmake --build $B -j 16 >> "$OUT/build.log" 2>&1
say "build rc=$? at $(date +%T) warnings=$(grep -c 'warning' "$OUT/build.log") $(grep -m1 'oneDNN' "$OUT/build.log")"
grep -E "error" "$OUT/build.log" | head -20 >> "$S"
if has cuda; then
  timeout 300 $B/tests/test_cuda > "$OUT/test_cuda.log" 2>&1; say "test_cuda rc=$? $(grep -E 'test cases:' "$OUT/test_cuda.log") at $(date +%T)"
  grep -B2 -A8 "ERROR" "$OUT/test_cuda.log" | head -80 >> "$S"
fi
if has dist; then
  (cd $B && timeout 120 ctest --output-on-failure -R 'dist|ddp' > "$OUT/dist.log" 2>&1); say "ctest dist rc=$? $(grep 'tests passed' "$OUT/dist.log")"
  timeout 120 $B/tests/test_cuda -tc='*istribut*,*NCCL*,*nccl*,*DDP*,*ddp*' >> "$OUT/dist.log" 2>&1; say "test_cuda dist rc=$? $(grep 'test cases:' "$OUT/dist.log" | tail -1)"
fi
if has sanitize; then
  KILN_TEST_CUPTI_TAKEN=1 timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/test_cuda \
    -tc="${SAN_CASES:-*fused_linear_gelu*,*CudaGraph*,*captured*,*CUDA graph*,*capture*,*skinny*,*sm90*}" -tce='*float64*' > "$OUT/sanitizer.log" 2>&1
  say "compute-sanitizer rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -1) $(grep -E 'test cases:' "$OUT/sanitizer.log")"
fi
if has mlp; then
  torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
  if cmake --install $B --prefix "$PWD/$B/install" > "$OUT/libtorch.log" 2>&1 &&
     cmake -S bench/libtorch -B $B-libtorch -G Ninja -DCMAKE_PREFIX_PATH="$torch_prefix;$PWD/$B/install" >> "$OUT/libtorch.log" 2>&1 &&
     timeout 200 cmake --build $B-libtorch -j 16 --target side_by_side_fused_mlp >> "$OUT/libtorch.log" 2>&1; then
    timeout 120 $B-libtorch/side_by_side_fused_mlp --dtype all > "$OUT/mlp.txt" 2>&1
    say "side_by_side_fused_mlp rc=$? at $(date +%T)"; grep -A12 '^dtype' "$OUT/mlp.txt" | tail -14 >> "$S"
  else
    say "libtorch side-by-side: build failed"; tail -20 "$OUT/libtorch.log" >> "$S"
  fi
fi
if has cpu; then
  nproc_all=$(nproc)
  timeout 400 python3 bench/cpu_vs_torch.py --build $B --threads 1,$nproc_all --repeats 11 --torch-python python3 \
    ${FM:+--fashion-mnist $FM} > "$OUT/cpu.txt" 2>&1; say "cpu_vs_torch rc=$? at $(date +%T)"
  timeout 300 python3 bench/cpu_elementwise_vs_torch.py --binary $B/bench/cpu_elementwise --threads 1,$nproc_all \
    >> "$OUT/cpu.txt" 2>&1; say "cpu_elementwise_vs_torch rc=$? at $(date +%T)"
  cat "$OUT/cpu.txt" >> "$S"
fi
say "end $(date +%T)"
