#!/usr/bin/env bash
# The profiler's accuracy check: per-kernel durations from Kiln's profiler agree with Nsight
# Compute's gpu__time_duration for the same kernels within 5% for kernels of at least 10 us.
#
# Runs bench/profiler_kernel_times twice: once with Kiln's profiler recording (--profile,
# which prints each kernel's CUPTI duration), once without it under ncu (--plain), profiling
# only the launches inside the NVTX range "kiln_measured", with ncu's clock and cache control
# off so the kernels run at the clocks and with the caches of a normal run. Both runs launch
# the same kernels in the same order; scripts/ncu_agreement.py pairs them launch by launch,
# checks the kernel names agree, and judges each kernel of the op sequence by the median of
# its repeats on each side (|Kiln / ncu - 1| <= 5%, kernels of at least 10 us by ncu's
# figure; shorter ones are listed and skipped). Launch-by-launch ratios are printed too.
#
#   scripts/ncu_agreement.sh BUILD_DIR OUT_DIR
#
# Leaves OUT_DIR/kiln_kernels.txt, OUT_DIR/ncu.csv and OUT_DIR/ncu_app.log; prints the
# comparison and `RESULT ncu_agreement PASS n/m` (or FAIL). Exit status: 0 PASS, 1 FAIL,
# 2 when a run could not be made (no binary, no ncu, ncu or the program failed).
set -uo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR OUT_DIR" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
build=$1
out=$2
exe="$build/bench/profiler_kernel_times"
mkdir -p "$out"
if [[ ! -x $exe ]]; then
  echo "ncu_agreement: $exe not built (it needs a CUDA build)"
  exit 2
fi
if ! command -v ncu > /dev/null; then
  echo "ncu_agreement: ncu (Nsight Compute CLI) not on PATH"
  exit 2
fi

if ! "$exe" --profile > "$out/kiln_kernels.txt" 2> "$out/kiln_stderr.log"; then
  echo "ncu_agreement: profiler_kernel_times --profile failed (see $out/kiln_kernels.txt, $out/kiln_stderr.log)"
  tail -5 "$out/kiln_kernels.txt" "$out/kiln_stderr.log"
  exit 2
fi

# --print-units base: times in nanoseconds; --log-file keeps ncu's CSV apart from the
# program's own output.
rm -f "$out/ncu.csv"
if ! ncu --nvtx --nvtx-include "kiln_measured/" --metrics gpu__time_duration.sum \
     --clock-control none --cache-control none --csv --print-units base --print-kernel-base demangled \
     --log-file "$out/ncu.csv" "$exe" --plain > "$out/ncu_app.log" 2>&1; then
  echo "ncu_agreement: ncu run failed (see $out/ncu.csv and $out/ncu_app.log)"
  tail -5 "$out/ncu.csv" "$out/ncu_app.log" 2> /dev/null
  exit 2
fi

python3 "$here/ncu_agreement.py" "$out/kiln_kernels.txt" "$out/ncu.csv"
