#!/usr/bin/env bash
# The sm_90a linear+GELU kernel's GPU check, self-contained (no Kiln build needed): builds
# bench/sm90_linear_gelu_check.cu unless a prebuilt `sm90_check` that runs here sits beside
# this script, then runs gelu_fast on every 16-bit input, the per-variant and dispatch
# correctness checks, the benchmark, compute-sanitizer (memcheck, synccheck, racecheck) on
# small calls of every variant, and counts HGMMA instructions in the SASS. Needs about 150 s on
# an H200 (plus the build, about 90 s, without a prebuilt binary).
# Full logs go to $OUT; the summary table is printed last.
#
#   scripts/sm90_gpu_check.sh                    # from a Kiln checkout on an H100/H200
#   SRC=/path/to/copied/tree OUT=/tmp/o scripts/sm90_gpu_check.sh
#   VARIANTS="v0 v7" BENCH="0,7" FULL="6" ...    # checked and benchmarked variants; variants run on the
#                                                # dispatch's case list too (names 0-9, a-g)
#   SANITIZE="0,a" ...                           # variants run under compute-sanitizer (default: all)
#   SKIP_SANITIZE=1 SKIP_DISPATCH=1 ...          # no compute-sanitizer runs, no dispatch correctness run
#   BENCH_TIMEOUT=210 ...                        # seconds for the benchmark (default 150)
#   SM90_BENCH_SHAPES=targets ...                # benchmark the two target shapes only
#   SKIP_GELU=1 ...                              # no exhaustive gelu_fast check (the fit unchanged)
#   BUILD_ONLY=1 ...                             # only build the harness, into scripts/sm90_check
#   PROFILE="0,a,h" ...                          # in-kernel clock profile of these variants (profile.log)
#   NCU="a0 a2" ...                              # ncu --set full of variant a, bench_skip 0 / 2 (ncu.log)
#   ABTEST="0,a" ...                             # target shapes, cuBLASLt and these variants taking turns
#                                                # (appended to profile.log)
#   SASS_FN=regex ...                            # the SASS of the matching kernels (sass_fn.txt)
# While the profile and benchmark run, nvidia-smi samples SM clock and power (smi.csv).
# The build needs fmt's headers (header-only mode): installed, or FMT_INC=<folder holding fmt/>
# (default $SRC/include, where a copied tree can carry them).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=${SRC:-$(cd "$HERE/.." && pwd)}
OUT=${OUT:-$SRC/sm90-check-out}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"

BIN=$HERE/sm90_check
if [[ -n "${BUILD_ONLY:-}" ]] || ! "$BIN" probe > /dev/null 2>&1; then
  echo "building the harness"
  [[ -n "${BUILD_ONLY:-}" ]] || BIN=/tmp/sm90_check
  FMT_INC=${FMT_INC:-$SRC/include}
  nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DFMT_CONSTEVAL= \
    -DFMT_USE_CONSTEXPR=1 -DFMT_HEADER_ONLY -diag-suppress 20208 -Xcompiler=-Wall,-Wextra,-fopenmp -I"$SRC" \
    -I"$FMT_INC" "$SRC/bench/sm90_linear_gelu_check.cu" "$SRC/core/error.cpp" -o "$BIN" -lcublasLt -lgomp \
    > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
# ptxas's C7520 and C7515 notices: some wgmma are serialised (accumulators moved on a divergent
# path; accumulators defined by other instructions inside a wgmma pipeline stage).
echo "wgmma serialised (ptxas C7520/C7515) in $(grep -cE 'C75(20|15)' "$OUT/build.log" 2> /dev/null || echo 0) kernels of the harness"
[[ -z "${BUILD_ONLY:-}" ]] || exit 0

# SASS: the tensor-core instructions must be HGMMA (wgmma), not HMMA.
if command -v cuobjdump > /dev/null; then
  cuobjdump --dump-sass "$BIN" > /tmp/sm90.sass 2>&1
  {
    echo "HGMMA lines: $(grep -c HGMMA /tmp/sm90.sass)"
    echo "HMMA lines (should be 0): $(grep -c ' HMMA' /tmp/sm90.sass)"
    echo "UTMALDG lines: $(grep -c UTMALDG /tmp/sm90.sass)"
    echo "local memory (LDL/STL) lines: $(grep -cE 'LDL|STL' /tmp/sm90.sass)"
    # gelu_fast's cost per element: the instructions of each fit's exhaustive-check kernel (the
    # same load, convert, round and store around every fit), then the bf16 shipped and
    # scaled ones' instructions (GeluFit 0 and 1).
    awk '/Function :/ { f = ($3 ~ /gelu_every_value_kernel/) ? $3 : "" }
         f != "" && /\/\*[0-9a-f]+\*\// && !/NOP/ { n[f]++ }
         END { for (k in n) print "gelu check kernel instructions:", n[k], k }' /tmp/sm90.sass | sort -k5
    awk '/Function :/ { p = ($3 ~ /gelu_every_value_kernel.*nv_bfloat16.*GeluFitE[01]E/); if (p) print $3 }
         p && /\/\*[0-9a-f]+\*\// && !/NOP/ { sub(/;.*/, ""); print }' /tmp/sm90.sass
  } | tee "$OUT/sass.txt"
  # SASS_FN=regex: the whole SASS of the kernels whose mangled names match, to read the schedule.
  if [[ -n "${SASS_FN:-}" ]]; then
    awk -v re="$SASS_FN" '/Function :/ { p = ($3 ~ re) } p' /tmp/sm90.sass > "$OUT/sass_fn.txt"
    echo "SASS of $(grep -c 'Function :' "$OUT/sass_fn.txt") kernel(s) matching $SASS_FN: $OUT/sass_fn.txt"
  fi
fi

status=0
if [[ -z "${SKIP_GELU:-}" ]]; then
  timeout 20 "$BIN" gelu > "$OUT/gelu.log" 2>&1 || { status=1; echo "gelu check failed"; }
  grep RESULT "$OUT/gelu.log"
fi
variants=""
for v in ${VARIANTS:-v0 v1 v2 v3 v4 v5 v6 v7 v8 v9}; do
  timeout 20 "$BIN" correct $v >> "$OUT/correct.log" 2>&1
  rc=$?
  tail -1 "$OUT/correct.log"
  if [[ $rc -eq 0 ]]; then variants="$variants${v#v},"; else status=1; echo "variant $v: rc $rc"; fi
done
bench_list=$variants
if [[ -n "${BENCH:-}" ]]; then  # the requested variants that passed
  bench_list=""
  for v in ${BENCH//,/ }; do [[ ",$variants" == *",$v,"* ]] && bench_list="$bench_list$v,"; done
fi
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv \
  -lms 100 > "$OUT/smi.csv" 2>&1 &
smi=$!
if [[ -n "${PROFILE:-}" ]]; then
  timeout 60 "$BIN" profile "$PROFILE" > "$OUT/profile.log" 2>&1 || { status=1; echo "profile rc $?"; }
  grep -E "^(PROFILE|TAIL)" "$OUT/profile.log" | sed -e "s/  */ /g"
fi
if [[ -n "${ABTEST:-}" ]]; then
  timeout 90 "$BIN" abtest "$ABTEST" >> "$OUT/profile.log" 2>&1 || { status=1; echo "abtest rc $?"; }
  grep ABTEST "$OUT/profile.log" | sed -e 's/  */ /g'
fi
timeout "${BENCH_TIMEOUT:-150}" "$BIN" bench "${bench_list:-none}" > "$OUT/bench.log" 2>&1 \
  || { status=1; echo "bench rc $?"; }
kill "$smi" 2> /dev/null
ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
if [[ -n "${NCU:-}" && -n "$ncu_bin" ]]; then
  for case in $NCU; do
    echo "==== ncu: variant ${case:0:1}, bench_skip ${case:1}" >> "$OUT/ncu.log"
    timeout 60 "$ncu_bin" --set full --metrics regex:sm__pipe_tensor_op.* -k regex:linear_gelu --launch-skip 1 -c 1 \
      "$BIN" once "${case:0:1}" "${case:1}" >> "$OUT/ncu.log" 2>&1 || echo "ncu $case rc $?"
    grep -E "^ +(Duration|SM Frequency|Elapsed Cycles|Issue Slots Busy|No Eligible)" "$OUT/ncu.log" | tail -5
  done
fi
if [[ -z "${SKIP_DISPATCH:-}" ]]; then
  timeout 70 "$BIN" correct dispatch >> "$OUT/correct.log" 2>&1 || { status=1; echo "dispatch correctness failed"; }
fi
for v in ${FULL:-}; do
  timeout 70 "$BIN" correct "full$v" >> "$OUT/correct.log" 2>&1 || { status=1; echo "full$v correctness failed"; }
done
grep -E "^(FAIL|RESULT)" "$OUT/correct.log" | tail -40
if [[ -z "${SKIP_SANITIZE:-}" ]] && command -v compute-sanitizer > /dev/null; then
  for tool in memcheck synccheck racecheck; do
    timeout 60 compute-sanitizer --tool $tool "$BIN" sanitize ${SANITIZE:-} > "$OUT/$tool.log" 2>&1
    echo "$tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|RESULT' "$OUT/$tool.log" | tr '\n' ' ')"
    { echo "==== $tool"; cat "$OUT/$tool.log"; } >> "$OUT/sanitize.log" && rm -f "$OUT/$tool.log"
  done
fi
sed -n '/==== summary/,$p' "$OUT/bench.log"
exit $status
