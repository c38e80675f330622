#!/usr/bin/env python3
"""Kiln's CPU elementwise ops and MLP block side by side with PyTorch's CPU path, one run.

Rows: gelu (exact erf, PyTorch's default), gelu_tanh, exp, tanh, sigmoid over float32
[64, 4096] and [1024, 4096], and the MLP block Linear(1024, 4096) -> GELU -> Linear(4096, 1024)
forward at batch 64 and 1024; "_wide" rows repeat both GELUs and the MLP on inputs whose
(pre-)activations have a standard deviation of ~32 (a third below -13); each at 1 thread and at all cores. Kiln runs through the
bench/cpu_elementwise binary (its OpenMP thread count set by --threads); PyTorch runs here with
torch.set_num_threads. Both report the median of several turns; the table shows the ratio
Kiln / PyTorch (below 1.0: Kiln is faster). --baseline adds a second Kiln binary (an older
build) taking its turn in the same rounds, for a before/after table from one run.

    /usr/bin/python3 bench/cpu_elementwise_vs_torch.py --binary build/bench/cpu_elementwise \
        [--baseline OLD_BUILD/bench/cpu_elementwise] [--threads 1,2] [--repeats 7] [--rounds 3]

Needs a Python with torch (Debian's python3-torch on the development machine).
"""
import argparse
import os
import statistics
import subprocess
import time

import torch


def kiln_rows(binary, threads, repeats):
    """{(name, shape): median_us} from one run of the Kiln binary."""
    out = subprocess.run([binary, "--threads", str(threads), "--repeats", str(repeats)], check=True,
                         capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] == "row":
            rows[(parts[1], parts[2])] = float(parts[4])
    return rows


def median_us(f, calls, repeats):
    f()  # warm-up
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            f()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(samples)


def torch_rows(threads, repeats):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    ops = [
        ("gelu", lambda x: torch.nn.functional.gelu(x)),
        ("gelu_tanh", lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
        ("exp", torch.exp),
        ("tanh", torch.tanh),
        ("sigmoid", torch.sigmoid),
    ]
    rows = {}
    with torch.no_grad():
        for n in (64, 1024):
            x = torch.randn(n, 4096)
            for name, op in ops:
                rows[(name, f"{n}x4096")] = median_us(lambda: op(x), 3 if n >= 1024 else 20, repeats)
        x = torch.randn(1024, 4096) * 32  # the "wide" rows: a third of the inputs below -13
        for name, op in ops[:2]:
            rows[(f"{name}_wide", "1024x4096")] = median_us(lambda: op(x), 3, repeats)
        mlp = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024))
        for batch in (64, 1024):
            x = torch.randn(batch, 1024)
            rows[("mlp", f"{batch}x1024")] = median_us(lambda: mlp(x), 2 if batch >= 1024 else 10, repeats)
            wide = x * 64  # pre-activations of standard deviation ~37
            rows[("mlp_wide", f"{batch}x1024")] = median_us(lambda: mlp(wide), 2 if batch >= 1024 else 10, repeats)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default="build/bench/cpu_elementwise")
    parser.add_argument("--threads", default=f"1,{os.cpu_count()}")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3, help="Kiln and PyTorch take turns this many times")
    parser.add_argument("--baseline", help="a second cpu_elementwise binary (before) timed in the same rounds")
    args = parser.parse_args()
    thread_counts = [int(t) for t in args.threads.split(",")]
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs; float32; medians of {args.repeats} turns, "
          f"then the median of {args.rounds} rounds; microseconds")
    base_cols = f" {'before us':>10} {'before/torch':>12}" if args.baseline else ""
    print(f"{'row':<10} {'shape':<10} {'threads':>7} {'Kiln us':>10} {'torch us':>10} {'Kiln/torch':>10}{base_cols}")
    for threads in thread_counts:
        # Kiln (and the baseline) and PyTorch take turns, `rounds` times; each row keeps the
        # median over rounds, so a burst of load on a shared machine hits every side alike.
        kiln_runs, base_runs, torch_runs = [], [], []
        for _ in range(args.rounds):
            if args.baseline:
                base_runs.append(kiln_rows(args.baseline, threads, args.repeats))
            kiln_runs.append(kiln_rows(args.binary, threads, args.repeats))
            torch_runs.append(torch_rows(threads, args.repeats))
        kiln = {k: statistics.median(r[k] for r in kiln_runs if k in r) for k in kiln_runs[0]}
        base = {k: statistics.median(r[k] for r in base_runs if k in r) for k in base_runs[0]} if base_runs else {}
        ref = {k: statistics.median(r[k] for r in torch_runs) for k in torch_runs[0]}
        for key, t_us in ref.items():
            cells = []
            for table in [kiln] + ([base] if args.baseline else []):
                us = table.get(key)
                cells.append((f"{us:10.1f}", f"{us / t_us:.2f}") if us else (f"{'-':>10}", "-"))
            line = f"{key[0]:<10} {key[1]:<10} {threads:>7} {cells[0][0]} {t_us:10.1f} {cells[0][1]:>10}"
            if args.baseline:
                line += f" {cells[1][0]} {cells[1][1]:>12}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
