#!/usr/bin/env bash
# Installs Kiln's build dependencies when they are missing (Debian 12 / Ubuntu 24.04):
# a C++20 compiler, CMake, Make, Eigen, fmt, doctest, nlohmann-json and zlib (Ninja too, for
# faster builds); and, optionally, the Fashion-MNIST data set the training example reads
# (Debian's dataset-fashion-mnist, /usr/share/datasets/fashion-mnist): without it everything
# still builds and the tests that need it skip, so failing to install it is only a warning.
# Also optional: oneDNN (libdnnl-dev), whose sgemm runs the CPU float GEMM when CMake finds it
# (KILN_ONEDNN, CMakeLists.txt); without it Eigen's slower kernel does.
# A copy staged in data/fashion-mnist (scripts/stage_fashion_mnist.sh) counts as installed;
# KILN_SETUP_DATA=0 skips the data set (an offline machine without a staged copy).
# Uses apt-get (through sudo when not root) and says what it installs; a second run
# finds everything present and does nothing.
set -euo pipefail

# package -> how to tell the dependency is already usable: a command on PATH ("cmd:NAME") or
# a header in the usual include folders ("hdr:PATH"), or a file ("file:PATH|PATH...", the
# first that exists; relative paths start at the repository root). This
# also covers machines where the tools or headers came from somewhere other than a .deb (a
# pip CMake, a source install).
declare -A probe=(
  [g++]=cmd:g++
  [make]=cmd:make
  [cmake]=cmd:cmake
  [ninja-build]=cmd:ninja
  [libeigen3-dev]=hdr:eigen3/Eigen/Core
  [libfmt-dev]=hdr:fmt/format.h
  [doctest-dev]=hdr:doctest/doctest.h
  [nlohmann-json3-dev]=hdr:nlohmann/json.hpp
  [zlib1g-dev]=hdr:zlib.h
  [libdnnl-dev]=hdr:oneapi/dnnl/dnnl.h
  [dataset-fashion-mnist]="file:/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz|data/fashion-mnist/t10k-labels-idx1-ubyte.gz"
)
order=(g++ make cmake libeigen3-dev libfmt-dev doctest-dev nlohmann-json3-dev zlib1g-dev ninja-build)
optional=(libdnnl-dev dataset-fashion-mnist)
[[ ${KILN_SETUP_DATA:-1} == 0 ]] && optional=(libdnnl-dev)
# What goes without each optional package.
declare -A without=(
  [libdnnl-dev]="the CPU GEMM will use Eigen's kernel instead of oneDNN's"
  [dataset-fashion-mnist]="the tests that read Fashion-MNIST will skip"
)
root=$(cd "$(dirname "$0")/.." && pwd)

have() {
  local pkg=$1 kind=${probe[$1]%%:*} what=${probe[$1]#*:}
  if [[ $kind == cmd ]]; then
    command -v "$what" >/dev/null 2>&1 && return 0
  elif [[ $kind == file ]]; then
    local path
    IFS='|' read -ra paths <<< "$what"
    for path in "${paths[@]}"; do
      [[ $path == /* ]] || path=$root/$path
      [[ -e $path ]] && return 0
    done
  else
    for dir in /usr/include /usr/local/include; do [[ -e $dir/$what ]] && return 0; done
  fi
  command -v dpkg-query >/dev/null 2>&1 &&
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"
}

missing=()
for pkg in "${order[@]}"; do
  have "$pkg" || missing+=("$pkg")
done
missing_optional=()
for pkg in "${optional[@]}"; do
  have "$pkg" || missing_optional+=("$pkg")
done
[[ ${#missing[@]} -eq 0 && ${#missing_optional[@]} -eq 0 ]] && exit 0

# Optional packages that cannot be installed are reported, not fatal.
skip_optional() {
  local pkg
  for pkg in "${missing_optional[@]}"; do
    echo "setup: could not install $pkg ($1); ${without[$pkg]}" >&2
  done
  missing_optional=()
}

if ! command -v apt-get >/dev/null 2>&1; then
  if [[ ${#missing[@]} -eq 0 ]]; then skip_optional "no apt-get"; exit 0; fi
  echo "setup: missing build dependencies: ${missing[*]}" >&2
  echo "setup: this machine has no apt-get; install them with your package manager and run again." >&2
  exit 1
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    if [[ ${#missing[@]} -eq 0 ]]; then skip_optional "need root or sudo"; exit 0; fi
    echo "setup: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
refreshed=false
# Installs the given packages; on failure refreshes the package lists once and tries again.
install() {
  $sudo apt-get install -y --no-install-recommends "$@" && return 0
  $refreshed && return 1
  echo "setup: refreshing the package lists and trying again"
  refreshed=true
  $sudo apt-get update && $sudo apt-get install -y --no-install-recommends "$@"
}

if [[ ${#missing[@]} -gt 0 ]]; then
  echo "setup: installing missing build dependencies: ${missing[*]}"
  install "${missing[@]}"
fi
if [[ ${#missing_optional[@]} -gt 0 ]]; then
  echo "setup: installing optional packages: ${missing_optional[*]}"
  # One at a time, so one that cannot be installed does not keep the others out.
  for pkg in "${missing_optional[@]}"; do
    install "$pkg" || { missing_optional=("$pkg"); skip_optional "apt-get failed"; }
  done
fi
