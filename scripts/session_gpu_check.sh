#!/usr/bin/env bash
# One GPU-machine call for the lead's session checks: build (sm_90a, oneDNN from a carried
# .deps/dnnl.tar.xz when present), the whole CUDA suite, compute-sanitizer memcheck over the
# fused op / CUDA graph / skinny cases, LibTorch's side-by-side MLP block, and issue 17's CPU
# comparison on the host's cores (cpu_vs_torch.py with the Fashion-MNIST epoch row,
# cpu_elementwise_vs_torch.py; "cpudiag": the epoch's thread scaling and the host's facts).
# Results under $OUT (summary.txt first). .deps/dnnl.tar.xz (git-ignored; name .deps in the device tool's
# carry) is Debian 12's oneDNN as /tmp/dnnl_pkg/{include,lib}: mkdir -p /tmp/dnnl_pkg/{include,lib};
# cp -a /usr/include/{dnnl*,oneapi} /tmp/dnnl_pkg/include; cp -a /usr/lib/x86_64-linux-gnu/lib{dnnl,OpenCL}.so*
# /tmp/dnnl_pkg/lib; tar cJf .deps/dnnl.tar.xz -C /tmp dnnl_pkg (libdnnl-dev installed here).
#   OUT=/tmp/o STEPS="cuda sanitize mlp cpu" scripts/session_gpu_check.sh
# (BUILD_TARGETS="a b" builds only those targets; steps: cuda dist sanitize skinny mlp64 mlp torchmax cpudiag cpuprobe blas cpuside cpu
#  sm90; with "none" it only builds. sm90 builds the sm_90a harness (unless a carried scripts/sm90_check runs), bench/sm90_linear_gelu_check.cu,
#  beside the library's build and then runs scripts/sm90_gpu_check.sh with the environment's VARIANTS, BENCH,
#  PROFILE, ABTEST, ABTEST_SHAPES, SANITIZE, SKIP_SANITIZE ... into $OUT/sm90. PACK=1 leaves two files in $OUT,
#  summary.txt and logs.txt (every other log, concatenated): the device tool returns at most 8.
#  MLP_DTYPE=bfloat16 limits the mlp step's side_by_side_fused_mlp to one dtype; default all.)
set -u
OUT=${OUT:-/tmp/session-gpu}
STEPS=${STEPS:-"cuda sanitize mlp cpu"}
mkdir -p "$OUT"
B=build-gpu
nproc_all=$(nproc)  # the cpu steps compare 1 thread with all of them
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
# NCCL: the toolkit's copy if it has one, else the one PyTorch's wheels ship (header + libnccl.so.2).
nccl_flags=()
if [ ! -e /usr/local/cuda/include/nccl.h ]; then
  inc=$(find /usr /opt -name nccl.h -path '*include*' 2>/dev/null | head -1)
  lib=$(find /usr /opt -name 'libnccl.so*' 2>/dev/null | head -1)
  [ -n "$inc" ] && [ -n "$lib" ] && nccl_flags=(-DKILN_NCCL_INCLUDE="$(dirname "$inc")" -DKILN_NCCL_LIBRARY="$lib") &&
    export LD_LIBRARY_PATH=$(dirname "$lib"):${LD_LIBRARY_PATH:-}
  say "nccl: header ${inc:-none}, library ${lib:-none}"
fi
sm90_build=""
if has sm90 && ! scripts/sm90_check probe > /dev/null 2>&1; then  # no carried harness that runs here:
  # build it (no Kiln build needed: one nvcc beside the library's build)
  ( OUT=$OUT/sm90 BUILD_ONLY=1 bash scripts/sm90_gpu_check.sh > "$OUT/sm90_build.log" 2>&1
    echo "sm90 harness build rc=$? at $(date +%T)" >> "$OUT/sm90_build.log" ) &
  sm90_build=$!
fi
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DKILN_NATIVE=ON "${dnnl_flags[@]}" "${nccl_flags[@]}" \
  > "$OUT/build.log" 2>&1 && timeout 300 cmake --build $B -j 16 ${BUILD_TARGETS:+--target $BUILD_TARGETS} >> "$OUT/build.log" 2>&1
say "build rc=$? at $(date +%T) warnings=$(grep -c 'warning' "$OUT/build.log") $(grep -m1 'oneDNN' "$OUT/build.log") $(grep -m1 'NCCL backend' "$OUT/build.log")"
grep -E "error" "$OUT/build.log" | head -20 >> "$S"
say "wgmma serialised (ptxas C7520/C7515) in $(grep -cE 'C75(20|15)' "$OUT/build.log") kernels of the library build"
if has cuda; then
  timeout 300 $B/tests/test_cuda > "$OUT/test_cuda.log" 2>&1; say "test_cuda rc=$? $(grep -E 'test cases:' "$OUT/test_cuda.log") at $(date +%T)"
  grep -B2 -A8 "ERROR" "$OUT/test_cuda.log" | head -80 >> "$S"
fi
if has dist; then
  D=$OUT/dist.log
  TORCHRUN="python3 -m torch.distributed.run"
  timeout 120 $B/tests/test_cuda -tc='nccl*,NCCL*,DDP*,*istributed*' > "$D" 2>&1; say "test_cuda nccl/DDP rc=$? $(grep 'test cases:' "$D" | tail -1)"
  grep -B2 -A8 "ERROR" "$D" | head -40 >> "$S"
  (cd $B && timeout 200 ctest -j 8 --output-on-failure -R 'dist|example_train_fashion_mnist' >> "$D" 2>&1)
  say "ctest dist/examples rc=$? $(grep 'tests passed' "$D" | tail -1)"; grep -E "Failed|\*\*\*" "$D" | head >> "$S"
  timeout 120 $B/tests/dist_check --local all --device cuda --max-bytes 1073741824 >> "$D" 2>&1; say "dist_check local rc=$? $(grep -E 'dist_check: (PASS|FAIL)' "$D" | tail -1)"
  timeout 120 $TORCHRUN --nproc-per-node 1 --no-python $B/tests/dist_check --max-bytes 1073741824 >> "$D" 2>&1; say "dist_check torchrun rc=$? $(grep -E 'dist_check: (PASS|FAIL)' "$D" | tail -1)"
  if [ -n "${FM:-}" ]; then
    for mode in plain ddp torchrun; do
      case $mode in
        plain) cmd=($B/examples/train_fashion_mnist) ;;
        ddp) cmd=($B/examples/train_fashion_mnist --ddp) ;;
        torchrun) cmd=($TORCHRUN --nproc-per-node 1 --no-python $B/examples/train_fashion_mnist --ddp) ;;
        local) cmd=($B/examples/train_fashion_mnist --ddp-local 1) ;;
      esac
      timeout 90 "${cmd[@]}" --data "$FM" --epochs 1 --seed 0 --checkpoint /tmp/fm_$mode.safetensors > "$OUT/fm_$mode.log" 2>&1
      say "fashion-mnist $mode rc=$? $(grep RESULT "$OUT/fm_$mode.log")"
    done
    timeout 60 $B/examples/train_fashion_mnist --ddp-local 1 --data "$FM" --epochs 1 --limit 8192 --profile --first-bucket-cap-mb 0.1 \
      --bucket-cap-mb 0.2 --trace /tmp/ddp_1gpu.json > "$OUT/fm_profile.log" 2>&1
    say "fashion-mnist ddp profile rc=$? $(grep -c 'nccl:all_reduce' "$OUT/fm_profile.log") nccl rows; trace $(stat -c %s /tmp/ddp_1gpu.json 2>/dev/null) bytes"
    python3 - "$OUT/fm_profile.log" /tmp/ddp_1gpu.json >> "$S" 2>&1 <<'PY'
import json, sys
rows = [l for l in open(sys.argv[1]) if "nccl" in l.lower()][:6]
print("".join(rows), end="")
try:
    ev = json.load(open(sys.argv[2]))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    k = [e for e in ev if e.get("ph") == "X" and "nccl" in e.get("name", "").lower() and e.get("cat", "") in ("kernel", "gpu", "cuda")]
    other = [e for e in ev if e.get("ph") == "X" and e.get("cat", "") in ("kernel", "gpu", "cuda") and "nccl" not in e.get("name", "").lower()]
    print("trace: nccl kernels", len(k), "on streams", sorted({str(e.get("tid")) for e in k}), "; other kernels on", sorted({str(e.get("tid")) for e in other})[:6])
except Exception as exc:
    print("trace: not read:", exc)
PY
  fi
fi
if has sanitize; then
  KILN_TEST_CUPTI_TAKEN=1 timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/test_cuda \
    -tc="${SAN_CASES:-*fused_linear_gelu*,*CudaGraph*,*captured*,*CUDA graph*,*capture*,*skinny*,*sm90*}" -tce='*float64*' > "$OUT/sanitizer.log" 2>&1
  say "compute-sanitizer rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -1) $(grep -E 'test cases:' "$OUT/sanitizer.log")"
fi
if has skinny; then
  # Issue 15's batch-64 MLP block: the skinny GEMM's benchmark (its block rows compare the ring
  # depths and the L2 prefetch in one process) and the fused_mlp example's latencies.
  timeout 150 $B/bench/skinny_gemm ${SKINNY_ARGS:-} > "$OUT/skinny.txt" 2>&1; say "skinny_gemm rc=$? at $(date +%T)"
  grep -E "mlp block|graph|target" "$OUT/skinny.txt" | head -30 >> "$S"
fi
if has skinny || has mlp64; then
  timeout 90 $B/examples/fused_mlp --device cuda --dtype bfloat16 --batch 64 --iterations 300 > "$OUT/fused_mlp.txt" 2>&1
  say "fused_mlp rc=$?"; grep -A6 "^Latency" "$OUT/fused_mlp.txt" >> "$S"
fi
# Builds targets of the LibTorch side-by-side project (bench/libtorch) against this build, installed.
build_libtorch_bench() {
  local torch_prefix
  torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
  cmake --install $B --prefix "$PWD/$B/install" >> "$OUT/libtorch.log" 2>&1 &&
    cmake -S bench/libtorch -B $B-libtorch -G Ninja -DCMAKE_PREFIX_PATH="$torch_prefix;$PWD/$B/install" >> "$OUT/libtorch.log" 2>&1 &&
    timeout 200 cmake --build $B-libtorch -j 16 --target "$@" >> "$OUT/libtorch.log" 2>&1
}
if has mlp; then
  if build_libtorch_bench side_by_side_fused_mlp; then
    timeout 120 $B-libtorch/side_by_side_fused_mlp --dtype ${MLP_DTYPE:-all} > "$OUT/mlp.txt" 2>&1
    say "side_by_side_fused_mlp rc=$? at $(date +%T)"; grep -A12 '^dtype' "$OUT/mlp.txt" | tail -14 >> "$S"
  else
    say "libtorch side-by-side: build failed"; tail -20 "$OUT/libtorch.log" >> "$S"
  fi
fi
if has torchmax; then
  # torch.compile max-autotune beside default for the bf16 rows (autotuning takes minutes).
  timeout ${TORCHMAX_S:-240} python3 bench/torch_fused_mlp.py --compile --compile-modes default,max-autotune --precisions bfloat16 \
    > "$OUT/torchmax.txt" 2>&1; say "torch_fused_mlp max-autotune rc=$? at $(date +%T)"; tail -30 "$OUT/torchmax.txt" >> "$S"
fi
if has cpudiag && [ -n "${FM:-}" ]; then
  # Issue 17: how the Fashion-MNIST CPU epoch scales on this host, and what the host is
  # (SMT, CPU quota, CPU pressure, steal time), Kiln and PyTorch under the same settings.
  C=$OUT/cpudiag.txt
  { lscpu | grep -E "^CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|Model name"; echo "cgroup cpu.max: $(cat /sys/fs/cgroup/cpu.max 2>/dev/null)";
    echo "cpu pressure: $(head -1 /proc/pressure/cpu 2>/dev/null)"; } > "$C"
  steal() { awk '/^cpu /{print $9}' /proc/stat; }
  for cfg in "1" "8" "16" "16 passive"; do
    set -- $cfg; t=$1; policy=${2:-}
    s0=$(steal)
    k=$(env OMP_NUM_THREADS=$t ${policy:+OMP_WAIT_POLICY=$policy} timeout 60 $B/examples/train_fashion_mnist --device cpu --data "$FM" \
      --epochs 1 --seed 0 --checkpoint /tmp/cd.st 2>&1 | grep -oE "epoch_s [0-9.]+")
    p=$(env OMP_NUM_THREADS=$t ${policy:+OMP_WAIT_POLICY=$policy} timeout 90 python3 bench/fashion_mnist_torch.py --device cpu --data "$FM" \
      --epochs 1 --seed 0 2>&1 | grep -oE "train_s=[0-9.]+")
    echo "threads=$t ${policy:-default-wait}: kiln $k, pytorch $p, steal ticks $(( $(steal) - s0 ))" >> "$C"
  done
  OMP_NUM_THREADS=16 timeout 60 $B/examples/train_fashion_mnist --device cpu --data "$FM" --epochs 1 --limit 16384 --profile \
    --checkpoint /tmp/cd.st 2>&1 | grep -E "kiln::|train_step" | head -12 >> "$C"
  cat "$C" >> "$S"; say "cpudiag done at $(date +%T)"
fi
if has cpuprobe; then
  # Issue 17: one linear shape that a 16-thread cpu_linear process once ran several times slower
  # than its grid alone (BENCHMARKS.md 9): each run's wall and CPU time per call with the
  # process's page faults and context switches, under a few settings, beside the grids table.
  timeout 120 python3 - "$B/bench/cpu_linear" "$nproc_all" > "$OUT/cpuprobe.txt" 2>&1 <<'PY'
import os, resource, subprocess, sys
binary, threads = sys.argv[1], sys.argv[2]
runs = []
for shape in (["64", "4096", "1024"], ["64", "1024", "4096"]):
    for extra in ({}, {}, {"OMP_WAIT_POLICY": "passive"}, {"MALLOC_MMAP_THRESHOLD_": "1073741824", "MALLOC_TRIM_THRESHOLD_": "1073741824"},
                  {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}):
        runs.append((["linear"] + shape + ["--repeats", "21"], {"OMP_NUM_THREADS": threads, **extra}))
    runs.append((["linear"] + shape + ["--repeats", "21"], {"OMP_NUM_THREADS": "1"}))
runs.append((["grids", "64", "4096", "1024", "--layout", "nt"], {"OMP_NUM_THREADS": threads}))
for args, extra in runs:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([binary] + args, env={**os.environ, **extra}, capture_output=True, text=True, timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    d = lambda f: getattr(after, f) - getattr(before, f)
    print(" ".join(args), extra, "|", out.stdout.strip()[-1500:], out.stderr.strip()[-300:], "| minflt", d("ru_minflt"),
          "majflt", d("ru_majflt"), "vol_cs", d("ru_nvcsw"), "invol_cs", d("ru_nivcsw"), flush=True)
PY
  say "cpuprobe rc=$? at $(date +%T)"; cat "$OUT/cpuprobe.txt" >> "$S"
fi
if has blas; then
  # Issue 17: the BLAS libraries Debian packages (OpenBLAS, BLIS: .deps/blas.tar.xz, made from
  # libopenblas0-openmp and libblis4-openmp with libgfortran5) beside Kiln's GEMM and oneDNN's
  # sgemm, in one process per thread count (bench/cpu_blas), one thread twice.
  if [ -e .deps/blas.tar.xz ]; then
    tar xJf .deps/blas.tar.xz -C /tmp
    blas_path=/tmp/blas_pkg/openblas:/tmp/blas_pkg/blis:${LD_LIBRARY_PATH:-}
  fi
  # PyTorch's MKL (its CPU linear's GEMM) in the same process, through libtorch_cpu.so's cblas_sgemm;
  # OpenBLAS told the core type, as its detection reads the host's virtual CPU as an old one.
  torch_cpu=$(python3 -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib', 'libtorch_cpu.so'))" 2>/dev/null)
  for t in 1 1 $nproc_all; do
    LD_LIBRARY_PATH=${blas_path:-${LD_LIBRARY_PATH:-}} OPENBLAS_CORETYPE=SkylakeX OMP_NUM_THREADS=$t timeout 200 \
      $B/bench/cpu_blas --threads $t ${torch_cpu:+--cblas $torch_cpu} --shapes ${BLAS_SHAPES:-1024x1024x4096,1024x4096x1024,64x1024x4096,64x4096x1024} --repeats 11 >> "$OUT/blas.txt" 2>&1
    say "cpu_blas $t thread(s) rc=$? at $(date +%T)"
  done
  cat "$OUT/blas.txt" >> "$S"
fi
if has cpuside; then
  # Issue 17 in one process: Kiln's CPU linear and MLP block against LibTorch's (MKL), taking turns.
  if build_libtorch_bench side_by_side_cpu; then
    timeout 300 $B-libtorch/side_by_side_cpu --threads 1,$nproc_all ${CPUSIDE_ARGS:-} > "$OUT/cpuside.txt" 2>&1
    say "side_by_side_cpu rc=$? at $(date +%T)"; grep -vE '^RESULT' "$OUT/cpuside.txt" >> "$S"
  else
    say "side_by_side_cpu: build failed"; tail -20 "$OUT/libtorch.log" >> "$S"
  fi
fi
if has cpu; then
  timeout 400 python3 bench/cpu_vs_torch.py --build $B --threads 1,$nproc_all --repeats 11 --torch-python python3 ${CPU_ARGS:-} \
    ${FM:+--fashion-mnist $FM} > "$OUT/cpu.txt" 2>&1; say "cpu_vs_torch rc=$? at $(date +%T)"
  timeout 300 python3 bench/cpu_elementwise_vs_torch.py --binary $B/bench/cpu_elementwise --threads 1,$nproc_all \
    >> "$OUT/cpu.txt" 2>&1; say "cpu_elementwise_vs_torch rc=$? at $(date +%T)"
  for t in 1 $nproc_all; do OMP_NUM_THREADS=$t timeout 60 $B/bench/cpu_elementwise --threads $t --repeats 11 --only stream >> "$OUT/cpu.txt" 2>&1; done
  for t in 1 $nproc_all; do OMP_NUM_THREADS=$t timeout 90 $B/bench/cpu_elementwise --threads $t --repeats 10 --only mlp_profile >> "$OUT/cpu.txt" 2>&1; done
  cat "$OUT/cpu.txt" >> "$S"
fi
if has sm90; then
  if [ -n "$sm90_build" ]; then wait "$sm90_build"; tail -2 "$OUT/sm90_build.log" | tee -a "$S"
  else say "sm90: the carried scripts/sm90_check runs here"; fi
  OUT=$OUT/sm90 bash scripts/sm90_gpu_check.sh > "$OUT/sm90_console.txt" 2>&1; say "sm90_gpu_check rc=$? at $(date +%T)"
  grep -vE '^\s*/\*|^\s*$' "$OUT/sm90_console.txt" | grep -E 'RESULT|PROFILE|TAIL|ABTEST|rc [0-9]|lines|instructions|x[0-9.]+ vs Lt' >> "$S"
fi
say "end $(date +%T)"
if [ -n "${PACK:-}" ]; then
  find "$OUT" -type f ! -name summary.txt ! -name logs.txt | sort | while read -r f; do
    { echo "===== ${f#$OUT/}"; cat "$f"; } >> "$OUT/logs.txt" && rm -f "$f"
  done
fi
