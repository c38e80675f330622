#!/usr/bin/env bash
# The profiler start-up experiment (issue 13): for each way the device tracer can leave CUPTI
# between profiles (profiler/device_tracer.h, CuptiTeardown), one process of
# bench/profiler_startup (CUPTI's state is process-wide), then LibTorch's Kineto the same way
# (with and without TEARDOWN_CUPTI=1) when its bench is built; one table at the end.
#
#   scripts/profiler_startup_experiment.sh BUILD_DIR [LIBTORCH_BUILD_DIR] [OUT_DIR]
#
# BUILD_DIR: a CUDA build with target profiler_startup built; LIBTORCH_BUILD_DIR: the
# bench/libtorch project's build with libtorch_profiler_overhead (optional); OUT_DIR: where
# each process's full output goes (default: a temporary folder).
#
# Columns: a plain 1-element add in us per call before any profile, right after each stop()
# and 2.5 s after the last; start() and stop() in ms, the process's first and the median of
# the later ones; the first add and the first linear layer of each profile against the later
# ones (host time, then in parentheses the profiler's own event durations).
set -uo pipefail
BUILD=${1:?usage: scripts/profiler_startup_experiment.sh BUILD_DIR [LIBTORCH_BUILD_DIR] [OUT_DIR]}
TORCH_BUILD=${2:-}
OUT=${3:-$(mktemp -d)}
mkdir -p "$OUT"
bin="$BUILD/bench/profiler_startup"
[[ -x $bin ]] || { echo "no $bin: build target profiler_startup first" >&2; exit 1; }

variants=(
  "--teardown finalize --no-warm-up --cupti-zeroes"  # the tracer before issue 13
  "--teardown finalize --no-warm-up"
  "--teardown finalize"
  "--teardown finalize --preallocate 1"
  "--teardown background"
  "--teardown idle"
  "--teardown disable"
  "--teardown disable-all"
  "--teardown keep-subscriber"
  "--teardown reset"
  "--teardown disable-all --no-warm-up --cupti-zeroes"
)
status=0
n=0
for v in "${variants[@]}"; do
  n=$((n + 1))
  log=$(printf '%s/kiln_%02d.txt' "$OUT" "$n")
  # shellcheck disable=SC2086  # the variant's words are separate arguments
  if ! "$bin" $v > "$log" 2>&1; then
    echo "profiler_startup $v failed (see $log)" >&2
    status=1
  fi
done
if [[ -n $TORCH_BUILD && -x $TORCH_BUILD/libtorch_profiler_overhead ]]; then
  "$TORCH_BUILD/libtorch_profiler_overhead" --startup > "$OUT/kineto.txt" 2>&1 || status=1
  TEARDOWN_CUPTI=1 "$TORCH_BUILD/libtorch_profiler_overhead" --startup > "$OUT/kineto_teardown.txt" 2>&1 || status=1
fi

echo "profiler start-up experiment on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
echo "full outputs: $OUT"
echo
printf '%-40s | %s\n' variant \
  "op before after-stop settled (us) | start 1st  later  stop 1st  later (ms) | 1st add/steady  1st gemm/steady (host; profiler's)"
cat "$OUT"/kiln_*.txt "$OUT"/kineto*.txt 2> /dev/null | grep '^ROW ' | sed 's/^ROW //'
echo
cat "$OUT"/kiln_*.txt "$OUT"/kineto*.txt 2> /dev/null | grep -E '^(DETAIL|PHASES|profiler_startup: warning)'
exit $status
