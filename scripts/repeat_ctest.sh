#!/usr/bin/env bash
# Runs the whole suite N times in a row with ctest -j (default: 20 times, as many jobs as
# cores) and stops at the first failure: the check that no test depends on what other test
# processes do to the machine (issue 13: a GPU test once read the device's free memory).
#
#   scripts/repeat_ctest.sh [BUILD_DIR] [N] [JOBS]
set -uo pipefail
BUILD=${1:-build}
N=${2:-20}
JOBS=${3:-$(nproc)}
t0=$SECONDS
for i in $(seq "$N"); do
  if ! ctest --test-dir "$BUILD" -j "$JOBS" --output-on-failure > "$BUILD/repeat_ctest_$i.log" 2>&1; then
    grep -E 'tests passed|tests failed|\*\*\*Failed|\(Failed\)' "$BUILD/repeat_ctest_$i.log"
    echo "RESULT repeat_ctest failed on run $i of $N (log: $BUILD/repeat_ctest_$i.log)"
    exit 1
  fi
  rm -f "$BUILD/repeat_ctest_$i.log"
done
echo "RESULT repeat_ctest $N of $N runs passed (ctest -j $JOBS, $((SECONDS - t0)) s)"
