#!/usr/bin/env bash
# cross_entropy on the GPU, Kiln against PyTorch (issue 14): runs bench/cross_entropy (from
# the build folder BUILD, default build-gpu) and bench/torch_cross_entropy.py, keeps their
# outputs under OUT, and prints one table of host and GPU microseconds per call with
# Kiln / PyTorch ratios (lower is better for Kiln).
#
#   BUILD=build-gpu OUT=gpu-check-out scripts/cross_entropy_bench.sh
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-gpu-check-out}
mkdir -p "$OUT"
"$BUILD/bench/cross_entropy" > "$OUT/cross_entropy_kiln.txt" 2>&1 || { tail -20 "$OUT/cross_entropy_kiln.txt"; exit 1; }
if python3 -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null; then
  python3 bench/torch_cross_entropy.py > "$OUT/cross_entropy_pytorch.txt" 2>&1 || tail -20 "$OUT/cross_entropy_pytorch.txt"
else
  echo "PyTorch with CUDA not available: Kiln's figures only" > "$OUT/cross_entropy_pytorch.txt"
fi
cat "$OUT/cross_entropy_kiln.txt" "$OUT/cross_entropy_pytorch.txt" | grep -v '^RESULT'
# Side by side: Kiln's fused forward against F.cross_entropy, Kiln's forward + backward
# against the same aten kernels without autograd, and against autograd.grad.
cat "$OUT/cross_entropy_kiln.txt" "$OUT/cross_entropy_pytorch.txt" | awk '
  /^RESULT/ { r[$2] = $3 }
  END {
    printf "\n%-14s %-34s %10s %10s %7s %10s %10s %7s\n", "shape", "Kiln vs PyTorch", "Kiln host", "Torch host", "ratio", "Kiln GPU", "Torch GPU", "ratio"
    n = split("256x10 4096x1000 32768x32000", shapes, " ")
    split("fwd:fwd fwdbwd:fwdbwd_aten fwdbwd:fwdbwd_autograd", pairs, " ")
    for (i = 1; i <= n; ++i) for (j = 1; j <= 3; ++j) {
      split(pairs[j], kv, ":"); s = shapes[i]
      kh = r["kiln_xent_" kv[1] "_" s "_host_us"]; th = r["torch_xent_" kv[2] "_" s "_host_us"]
      kg = r["kiln_xent_" kv[1] "_" s "_gpu_us"]; tg = r["torch_xent_" kv[2] "_" s "_gpu_us"]
      if (kh == "" || th == "") continue
      printf "%-14s %-34s %10.2f %10.2f %7.2f %10.2f %10.2f %7.2f\n", s, kv[1] " vs " kv[2], kh, th, kh / th, kg, tg, kg / tg
    }
  }'
