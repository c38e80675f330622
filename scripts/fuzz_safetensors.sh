#!/usr/bin/env bash
# Fuzzes Kiln's safetensors loader with libFuzzer (tests/fuzz/fuzz_safetensors.cpp): a
# CPU-only clang build under AddressSanitizer + UBSan in build-fuzz/, seeded with the good
# files the ctest mutator starts from. Any crash, sanitizer report, exception other than
# kiln::Error, or loaded file that does not round-trip stops the run; libFuzzer then writes
# the input as crash-* in the working directory, and `fuzz_safetensors FILE` (any build)
# replays it.
#
#   scripts/fuzz_safetensors.sh [SECONDS]      (default 60)
#   BUILD_DIR=... JOBS=... scripts/fuzz_safetensors.sh 600
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build=${BUILD_DIR:-build-fuzz}
jobs=${JOBS:-$(nproc)}
if ! command -v clang++ >/dev/null; then
  echo "fuzz_safetensors.sh: clang++ not found (apt-get install clang); the seeded mutator runs in ctest instead" >&2
  exit 2
fi
generator=$(command -v ninja >/dev/null && echo Ninja || echo "Unix Makefiles")
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -fsized-deallocation: clang before 19 leaves C++14's sized operator delete off by default,
# and the allocator's free lists call it. No OpenMP: the loader has no threads to fuzz.
cmake -S . -B "$build" -G "$generator" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS=-fsized-deallocation -DKILN_OPENMP=OFF \
  -DKILN_CUDA=OFF -DKILN_SANITIZE=address,undefined -DKILN_LIBFUZZER=ON -DKILN_BUILD_BENCH=OFF \
  -DKILN_BUILD_EXAMPLES=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" -j "$jobs" --target fuzz_safetensors fuzz_safetensors_libfuzzer
corpus="$build/fuzz_corpus/safetensors"
"$build/tests/fuzz_safetensors" --write-corpus "$corpus"
mkdir -p "$build/fuzz_artifacts"
# The inputs a seed grows to stay small: the loader's checks are all in the header and sizes.
"$build/tests/fuzz_safetensors_libfuzzer" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=4096 \
  -artifact_prefix="$build/fuzz_artifacts/" -print_final_stats=1 "$corpus"
echo "fuzz_safetensors.sh: PASS ($seconds s of libFuzzer, no crash)"
