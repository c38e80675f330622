#!/usr/bin/env bash
# Checks that Kiln's NVTX ranges (profiler::EmitNvtx: one range per op, named as in the
# profiler's table, in the NVTX domain "kiln") reach a CUDA tool: Nsight Compute, asked to
# profile only the kernels launched inside "kiln::addmm" ranges of bench/profiler_kernel_times
# (whose measured section runs under EmitNvtx), must find some, all of them GEMM kernels
# (no elementwise, reduction or softmax kernel), and must find none for a range name no op
# has. (Nsight Systems, which shows the same ranges on its timeline, is not on the GPU
# machine; ncu reads the same NVTX stream.)
#
#   scripts/nvtx_check.sh BUILD_DIR OUT_DIR
#
# Prints `RESULT nvtx_ranges PASS n` (n: the kernels found under kiln::addmm) or FAIL.
# Exit status: 0 PASS, 1 FAIL, 2 when it could not run.
set -uo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR OUT_DIR" >&2
  exit 2
fi
exe="$1/bench/profiler_kernel_times"
out=$2
mkdir -p "$out"
[[ -x $exe ]] || { echo "nvtx_check: $exe not built"; exit 2; }
command -v ncu > /dev/null || { echo "nvtx_check: ncu not on PATH"; exit 2; }

# Kernel rows of an ncu CSV log (one metric per kernel, so one row each).
kernel_rows() { grep -c '"gpu__time_duration.sum"' "$1" || true; }

for range in addmm no_such_op; do
  if ! ncu --nvtx --nvtx-include "kiln@kiln::${range}/" --metrics gpu__time_duration.sum --csv \
       --log-file "$out/nvtx_${range}.csv" "$exe" --plain > "$out/nvtx_${range}_app.log" 2>&1; then
    echo "nvtx_check: ncu failed for kiln::${range} (see $out/nvtx_${range}.csv)"
    exit 2
  fi
done
found=$(kernel_rows "$out/nvtx_addmm.csv")
stray=$(kernel_rows "$out/nvtx_no_such_op.csv")
others=$(grep '"gpu__time_duration.sum"' "$out/nvtx_addmm.csv" | grep -ciE 'elementwise|vectorized|gelu|softmax|reduce' || true)
echo "kernels under kiln::addmm ranges: $found (non-GEMM among them: $others); under kiln::no_such_op: $stray"
grep '"gpu__time_duration.sum"' "$out/nvtx_addmm.csv" | head -3
if [[ $found -gt 0 && $others -eq 0 && $stray -eq 0 ]]; then
  echo "RESULT nvtx_ranges PASS $found"
  exit 0
fi
echo "RESULT nvtx_ranges FAIL $found"
exit 1
