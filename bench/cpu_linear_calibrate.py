#!/usr/bin/env python3
"""Fits the GEMM tile cost model's constants (ops/cpu/gemm_tiled.cpp, kFloatModel) to tile timings.

Input: the output of one or more runs of `build/bench/cpu_linear calibrate` (lines "tile rows cols
K layout median_ns model_ns"), one file per run; a shape's time is the median over the runs.
Model: time = call + pack_rows rows K + pack_cols cols K + mac rows ceil(cols / 48) 48 K +
out rows cols, fitted
by least squares on the relative error (every shape counts alike, small tiles as much as large
ones), with no constant below zero. Prints the constants, then each shape's measured time, the
fit and the current model's estimate, and the fit's median and worst relative errors.

  for i in 1 2 3; do OMP_NUM_THREADS=1 taskset -c 1 build/bench/cpu_linear calibrate > /tmp/c$i.txt; done
  python3 bench/cpu_linear_calibrate.py /tmp/c1.txt /tmp/c2.txt /tmp/c3.txt   (needs numpy)
"""
import argparse
import collections
import statistics

import numpy as np

REGISTER_BLOCK = 16  # the columns are rounded up to whole AVX-512 vectors of floats (fits better than oneDNN's 48)
NAMES = ["call_ns", "pack_rows_ns", "pack_cols_ns", "mac_ns", "out_ns"]


def features(rows, cols, k):
    padded = -(-cols // REGISTER_BLOCK) * REGISTER_BLOCK
    return [1.0, rows * k, cols * k, rows * padded * k, rows * cols]


def fit(x, y):
    """Non-negative least squares on relative error, by dropping negative terms one at a time."""
    active = list(range(x.shape[1]))
    w = 1.0 / y
    while True:
        coef, *_ = np.linalg.lstsq(x[:, active] * w[:, None], np.ones_like(y), rcond=None)
        if (coef >= 0).all():
            full = np.zeros(x.shape[1])
            full[active] = coef
            return full
        active.pop(int(np.argmin(coef)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="outputs of cpu_linear calibrate")
    parser.add_argument("--layouts", default="nt,nn,tn", help="layouts to fit (default all)")
    parser.add_argument("--min-rows", type=int, default=16, help="fit tiles of at least this many rows (default 16)")
    parser.add_argument("--min-cols", type=int, default=96,
                        help="fit tiles of at least this many columns, or of fewer than 48 (default 96)")
    args = parser.parse_args()
    times = collections.defaultdict(list)
    current = {}
    for path in args.runs:
        for line in open(path):
            f = line.split()
            if len(f) == 7 and f[0] == "tile":
                key = (int(f[1]), int(f[2]), int(f[3]), f[4])
                times[key].append(float(f[5]))
                current[key] = float(f[6])
    layouts = set(args.layouts.split(","))
    # The grid never cuts parts below --min-rows / --min-cols (gemm_tile_grid's kMinRows and
    # kMinCols), so shapes below them are fitted only where a whole product is that small.
    keys = sorted(k for k in times if k[3] in layouts and k[0] >= args.min_rows
                  and (k[1] >= args.min_cols or k[1] < REGISTER_BLOCK))
    x = np.array([features(*k[:3]) for k in keys], dtype=float)
    y = np.array([statistics.median(times[k]) for k in keys])
    coef = fit(x, y)
    print("fitted: " + ", ".join(f"{n} = {c:.4g}" for n, c in zip(NAMES, coef)))
    pred = x @ coef
    rel = np.abs(pred - y) / y
    cur_rel = np.abs(np.array([current[k] for k in keys]) - y) / y
    print(f"{'rows':>5} {'cols':>5} {'K':>5} {'lay':>3} {'measured_us':>12} {'fit_us':>9} {'model_us':>9}")
    for k, m, p in zip(keys, y, pred):
        print(f"{k[0]:>5} {k[1]:>5} {k[2]:>5} {k[3]:>3} {m * 1e-3:>12.1f} {p * 1e-3:>9.1f} {current[k] * 1e-3:>9.1f}")
    print(f"{len(keys)} shapes: fit's relative error median {np.median(rel):.3f}, worst {rel.max():.3f}; "
          f"the current model's median {np.median(cur_rel):.3f}, worst {cur_rel.max():.3f}")


if __name__ == "__main__":
    main()
