#!/usr/bin/env bash
# Installs Kiln's build dependencies when they are missing (Debian 12 / Ubuntu 24.04):
# a C++20 compiler, CMake, Make, Eigen, fmt and doctest (Ninja too, for faster builds).
# Uses apt-get (through sudo when not root) and says what it installs; a second run
# finds everything present and does nothing.
set -euo pipefail

# package -> a file whose presence means the dependency is usable (covers machines where
# the headers came from somewhere other than a .deb).
declare -A probe=(
  [cmake]=/usr/bin/cmake
  [make]=/usr/bin/make
  [g++]=/usr/bin/g++
  [libeigen3-dev]=/usr/include/eigen3/Eigen/Core
  [libfmt-dev]=/usr/include/fmt/format.h
  [doctest-dev]=/usr/include/doctest/doctest.h
  [ninja-build]=/usr/bin/ninja
)
order=(g++ make cmake libeigen3-dev libfmt-dev doctest-dev ninja-build)

have() {
  local pkg=$1
  [[ -e ${probe[$pkg]} ]] && return 0
  command -v dpkg-query >/dev/null 2>&1 &&
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"
}

missing=()
for pkg in "${order[@]}"; do
  have "$pkg" || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: missing build dependencies: ${missing[*]}" >&2
  echo "setup: this machine has no apt-get; install them with your package manager and run again." >&2
  exit 1
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "setup: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "setup: installing missing build dependencies: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}"; then
  echo "setup: refreshing the package lists and trying again"
  $sudo apt-get update
  $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi
