#!/usr/bin/env python3
"""The issue-14 Fashion-MNIST benchmark, side by side: runs the fixed recipe in PyTorch
(bench/fashion_mnist_torch.py) and, when given, in Kiln (examples/train_fashion_mnist), once
per seed, and checks the two targets: test accuracy within +-0.01 of PyTorch's (the mean over
the seeds, each seed shown) and total training time <= 0.5x PyTorch's (the mean train_s).

Both programs take --seed N --epochs E --batch B --lr LR --device D [--data DIR] and end with
one line each run:
    RESULT framework=<name> seed=<N> acc=<test accuracy> train_s=<seconds> ...
(train_s: the epochs' training loops only, device synchronised; see fashion_mnist_torch.py).

    python3 bench/fashion_mnist_compare.py --kiln build/examples/train_fashion_mnist [--seeds 0 1 2]
        [--data DIR] [--epochs 15] [--device cuda] [--log-dir DIR]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULT = re.compile(r"^RESULT (.*)$", re.M)


def parse_result(text, who):
    """The key=value pairs of the last RESULT line in `text`."""
    found = RESULT.findall(text)
    if not found:
        sys.exit(f"fashion_mnist_compare: {who} printed no RESULT line; its output ended with:\n{text[-2000:]}")
    fields = dict(kv.split("=", 1) for kv in found[-1].split() if "=" in kv)
    for key in ("acc", "train_s"):
        if key not in fields:
            sys.exit(f"fashion_mnist_compare: {who}'s RESULT line lacks {key}=: {found[-1]}")
    return fields


def run(cmd, who, log_path):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if log_path:
        with open(log_path, "w") as f:
            f.write(proc.stdout)
    if proc.returncode != 0:
        sys.exit(f"fashion_mnist_compare: {who} exited with {proc.returncode}: {' '.join(cmd)}\n{proc.stdout[-2000:]}")
    return parse_result(proc.stdout, who)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kiln", help="Kiln's training example (omit to run PyTorch only)")
    parser.add_argument("--torch", default=os.path.join(HERE, "fashion_mnist_torch.py"), help="PyTorch's script")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--data")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", default="1e-3")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--log-dir", help="keep each run's output here")
    args = parser.parse_args()
    common = ["--epochs", str(args.epochs), "--batch", str(args.batch), "--lr", args.lr, "--device", args.device]
    if args.data:
        common += ["--data", args.data]
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)

    frameworks = [("pytorch", [sys.executable, args.torch])]
    if args.kiln:
        # The fixed recipe has a constant learning rate (the PyTorch script's); the Kiln
        # example's default anneals it, so the comparison says so.
        frameworks.append(("kiln", [args.kiln, "--schedule", "constant"]))
    results = {name: [] for name, _ in frameworks}
    for seed in args.seeds:
        for name, cmd in frameworks:
            log = os.path.join(args.log_dir, f"fashion_mnist_{name}_seed{seed}.txt") if args.log_dir else None
            r = run(cmd + ["--seed", str(seed)] + common, f"{name} (seed {seed})", log)
            results[name].append((seed, float(r["acc"]), float(r["train_s"])))
            print(f"{name:8s} seed {seed}: acc {float(r['acc']):.4f}  train_s {float(r['train_s']):8.2f}", flush=True)

    print(f"\nFashion-MNIST, {args.epochs} epochs, batch {args.batch}, lr {args.lr}, {args.device}, "
          f"seeds {' '.join(map(str, args.seeds))}")
    means = {}
    for name, rows in results.items():
        means[name] = (statistics.mean(a for _, a, _ in rows), statistics.mean(t for _, _, t in rows))
        print(f"  {name:8s} mean acc {means[name][0]:.4f}  mean train_s {means[name][1]:8.2f}")
    if "kiln" not in means:
        return 0
    dacc = means["kiln"][0] - means["pytorch"][0]
    ratio = means["kiln"][1] / means["pytorch"][1]
    per_seed = "  ".join(f"{k[1] - p[1]:+.4f}" for k, p in zip(results["kiln"], results["pytorch"]))
    acc_ok, time_ok = abs(dacc) <= 0.01, ratio <= 0.5
    print(f"  accuracy: kiln - pytorch = {dacc:+.4f} (per seed {per_seed}); target |d| <= 0.01: "
          f"{'met' if acc_ok else 'NOT met'}")
    print(f"  time: kiln / pytorch = {ratio:.3f}; target <= 0.5: {'met' if time_ok else 'NOT met'}")
    print(f"SUMMARY fashion_mnist acc_delta={dacc:+.4f} time_ratio={ratio:.3f} acc_target={'met' if acc_ok else 'missed'} "
          f"time_target={'met' if time_ok else 'missed'}")
    return 0 if acc_ok and time_ok else 1


if __name__ == "__main__":
    sys.exit(main())
