#!/usr/bin/env bash
# Installs Kiln's build dependencies when they are missing (Debian 12 / Ubuntu 24.04):
# a C++20 compiler, CMake, Make, Eigen, fmt, doctest and nlohmann-json (Ninja too, for
# faster builds).
# Uses apt-get (through sudo when not root) and says what it installs; a second run
# finds everything present and does nothing.
set -euo pipefail

# package -> how to tell the dependency is already usable: a command on PATH ("cmd:NAME") or
# a header in the usual include folders ("hdr:PATH"). This also covers machines where the
# tools or headers came from somewhere other than a .deb (a pip CMake, a source install).
declare -A probe=(
  [g++]=cmd:g++
  [make]=cmd:make
  [cmake]=cmd:cmake
  [ninja-build]=cmd:ninja
  [libeigen3-dev]=hdr:eigen3/Eigen/Core
  [libfmt-dev]=hdr:fmt/format.h
  [doctest-dev]=hdr:doctest/doctest.h
  [nlohmann-json3-dev]=hdr:nlohmann/json.hpp
)
order=(g++ make cmake libeigen3-dev libfmt-dev doctest-dev nlohmann-json3-dev ninja-build)

have() {
  local pkg=$1 kind=${probe[$1]%%:*} what=${probe[$1]#*:}
  if [[ $kind == cmd ]]; then
    command -v "$what" >/dev/null 2>&1 && return 0
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
