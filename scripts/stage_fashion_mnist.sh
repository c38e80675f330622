#!/usr/bin/env bash
# Copies the four Fashion-MNIST .gz files from Debian's dataset-fashion-mnist
# (/usr/share/datasets/fashion-mnist, or SRC) into data/fashion-mnist under the repository
# root (git-ignored), for machines that cannot install the package: the GPU machine has no
# network, so the lead passes data/ in the device tool's `carry` and the examples and tests
# find it there (examples/data/fashion_mnist.h, find_fashion_mnist()).
# Idempotent: files already there with the same size and contents are left alone.
#
#   scripts/stage_fashion_mnist.sh [SRC]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-/usr/share/datasets/fashion-mnist}
dst=$root/data/fashion-mnist
files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)

for f in "${files[@]}"; do
  if [[ ! -f $src/$f ]]; then
    echo "stage_fashion_mnist: $src/$f is missing (apt-get install dataset-fashion-mnist, or scripts/setup.sh)" >&2
    exit 1
  fi
done
mkdir -p "$dst"
copied=0
for f in "${files[@]}"; do
  if [[ -f $dst/$f ]] && cmp -s "$src/$f" "$dst/$f"; then continue; fi
  cp "$src/$f" "$dst/$f.tmp"
  mv "$dst/$f.tmp" "$dst/$f"
  copied=$((copied + 1))
done
echo "stage_fashion_mnist: $dst holds the four files ($copied copied, $(du -sh "$dst" | cut -f1) in all)"
