#!/usr/bin/env python3
"""Kiln's CPU path side by side with PyTorch's CPU path, same machine, same thread count.

For each thread count (1 and all cores by default) and each workload in WORKLOADS, runs
Kiln's benchmark binary (build/bench/cpu_linear, OMP_NUM_THREADS=n) and PyTorch in a child
process (torch.set_num_threads(n), with OMP/OpenBLAS/MKL thread variables set to n too, as a
BLAS behind torch reads its own), and prints medians and the ratio Kiln / PyTorch (< 1 means
Kiln is faster). The driver needs no torch; the PyTorch side runs under --torch-python
(default Debian's /usr/bin/python3, whose python3-torch is CPU-only). It also says which BLAS
torch loaded: with Debian's reference BLAS (no libopenblas installed) torch's CPU GEMM is
~50x slower than with OpenBLAS, and the ratios would flatter Kiln.

With --fashion-mnist DIR it adds one more row per thread count: the issue-14 Fashion-MNIST
recipe on the CPU (examples/train_fashion_mnist --device cpu against bench/fashion_mnist_torch.py
--device cpu, same data, same thread variables), --fm-epochs epochs (default 2) in one process
each, reported as the mean training time per epoch (train_s / epochs; the first epoch's
first-call costs included on both sides).

After the table it prints the GEMM tile grids of a few shapes on the most threads (and two
on one thread), each measured and estimated by the tile cost model (--no-grids skips them).

  python3 bench/cpu_vs_torch.py [--build build] [--threads 1,2] [--repeats 21] [--rounds 1] [--fashion-mnist DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from fashion_mnist_compare import parse_result  # the RESULT line of both training programs

# One entry per row. "kiln": arguments of the Kiln binary (after its path); "torch": the name
# of a function in TORCH_WORKER plus its arguments. The MLP block rows (GELU, issue 17) go
# here as more entries, with their Kiln mode in bench/cpu_linear.cpp and their torch
# function in TORCH_WORKER.
WORKLOADS = [
    {"name": "linear (64,1024,4096) fp32", "kiln": ["linear", "64", "1024", "4096"],
     "torch": ["linear", 64, 1024, 4096]},
    # The batch-64 MLP block's second GEMM (K = 4096): beside the row above, it says whether
    # the two GEMMs of the block cost alike (BENCHMARKS.md 9, third session).
    {"name": "linear (64,4096,1024) fp32", "kiln": ["linear", "64", "4096", "1024"],
     "torch": ["linear", 64, 4096, 1024]},
    {"name": "linear (1024,1024,4096) fp32", "kiln": ["linear", "1024", "1024", "4096"],
     "torch": ["linear", 1024, 1024, 4096]},
]

# The tile grids measured against the cost model (cpu_linear grids M K N --layout L): the
# Fashion-MNIST step's GEMMs (batch 256, 784-256-128-10: forward "nt", the input's gradient
# "nn", the weight's gradient "tn") and the linear rows' shapes on the most threads, and the
# two batch-64 GEMMs on one thread (whole product against tiles run one after another).
GRID_SHAPES = [("256", "784", "256", "nt"), ("256", "256", "128", "nt"), ("256", "128", "256", "nn"),
               ("256", "256", "784", "tn"), ("128", "256", "256", "tn"), ("64", "1024", "4096", "nt"),
               ("64", "4096", "1024", "nt"), ("1024", "1024", "4096", "nt")]
ONE_THREAD_GRID_SHAPES = [("64", "1024", "4096", "nt"), ("64", "4096", "1024", "nt")]

# Runs in the child interpreter: reads {"threads", "repeats", "workloads"} as JSON on stdin,
# prints {"medians_ms": [...], "blas": "...", "version": "..."} as JSON.
TORCH_WORKER = r"""
import json, sys, time
import torch
req = json.load(sys.stdin)
torch.set_num_threads(req["threads"])
torch.manual_seed(0)

def linear(m, k, n):
    x, w, b = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
    return lambda: torch.nn.functional.linear(x, w, b)

def median_ms(f, repeats):
    f()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2] * 1e3

blas = sorted({line.split()[-1] for line in open("/proc/self/maps")
               if any(s in line for s in ("blas", "mkl", "blis"))})
with torch.no_grad():
    medians = [median_ms(globals()[w[0]](*w[1:]), req["repeats"]) for w in req["workloads"]]
print(json.dumps({"medians_ms": medians, "blas": blas, "version": torch.__version__,
                  "threads": torch.get_num_threads()}))
"""


def thread_env(n):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
        env[var] = str(n)
    return env


def run_kiln(binary, args, threads, repeats):
    out = subprocess.run([binary, *args, "--repeats", str(repeats)], env=thread_env(threads), check=True,
                         capture_output=True, text=True).stdout
    fields = out.split()
    if len(fields) < 4 or fields[0] != "median_ms" or int(fields[3]) != threads:
        sys.exit(f"cpu_vs_torch: unexpected output of {binary} {' '.join(args)}: {out!r}")
    return float(fields[1])


def run_torch(python, threads, repeats):
    req = {"threads": threads, "repeats": repeats, "workloads": [w["torch"] for w in WORKLOADS]}
    proc = subprocess.run([python, "-c", TORCH_WORKER], input=json.dumps(req), env=thread_env(threads),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"cpu_vs_torch: the PyTorch side failed under {python}:\n{proc.stderr}")
    return json.loads(proc.stdout)


def print_grids(binary, threads, repeats):
    """cpu_linear's fork cost and grid tables on `threads` threads (ONE_THREAD_GRID_SHAPES on 1)."""
    jobs = [(["fork"], threads)] + [(["grids", *shape[:3], "--layout", shape[3]], threads) for shape in GRID_SHAPES]
    jobs += [(["grids", *shape[:3], "--layout", shape[3]], 1) for shape in ONE_THREAD_GRID_SHAPES]
    print("\nGEMM tile grids: measured against the cost model (ops/cpu/gemm_tiled.cpp)")
    for args, n in jobs:
        proc = subprocess.run([binary, *args, "--repeats", str(repeats)], env=thread_env(n), capture_output=True,
                              text=True)
        print(proc.stdout.rstrip() if proc.returncode == 0 else f"{' '.join(args)} failed: {proc.stderr[-500:]}")


def fashion_mnist_epoch_s(build, python, data, epochs, threads):
    """(Kiln, PyTorch) mean seconds per CPU training epoch of the Fashion-MNIST recipe."""
    common = ["--device", "cpu", "--epochs", str(epochs), "--data", data, "--seed", "0"]
    kiln_binary = os.path.join(build, "examples", "train_fashion_mnist")
    checkpoint = os.path.join(tempfile.gettempdir(), f"cpu_vs_torch_fm_{os.getpid()}.safetensors")
    runs = {"kiln": [kiln_binary, *common, "--checkpoint", checkpoint],
            "torch": [python, os.path.join(os.path.dirname(__file__), "fashion_mnist_torch.py"), *common]}
    seconds = {}
    for side, cmd in runs.items():
        proc = subprocess.run(cmd, env=thread_env(threads), capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"cpu_vs_torch: {' '.join(cmd)} failed:\n{proc.stdout[-1000:]}{proc.stderr[-2000:]}")
        if side == "kiln" and os.path.exists(checkpoint):
            os.remove(checkpoint)
        result = parse_result(proc.stdout, cmd[0])
        seconds[side] = float(result["train_s"]) / epochs
        print(f"  fashion-mnist {side}, {threads} thread(s): acc={result['acc']} "
              f"train_s={seconds[side] * epochs:.2f} over {epochs} epoch(s)")
    return seconds["kiln"], seconds["torch"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build", help="Kiln build directory (default: build)")
    parser.add_argument("--threads", default=f"1,{os.cpu_count()}", help="thread counts (default: 1 and all cores)")
    parser.add_argument("--repeats", type=int, default=21, help="timed calls per workload (median)")
    parser.add_argument("--torch-python", default="/usr/bin/python3", help="interpreter with torch")
    parser.add_argument("--fashion-mnist", metavar="DIR", help="add the CPU Fashion-MNIST epoch row (IDX .gz files in DIR)")
    parser.add_argument("--fm-epochs", type=int, default=2, help="epochs per Fashion-MNIST run (default 2)")
    parser.add_argument("--no-grids", action="store_true", help="skip the GEMM tile grid tables (cpu_linear grids)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="Kiln and PyTorch take turns this many times per thread count; the table shows the "
                             "median of the rounds' medians and, with more than one round, each side's range")
    args = parser.parse_args()
    binary = os.path.join(args.build, "bench", "cpu_linear")
    if not os.access(binary, os.X_OK):
        sys.exit(f"cpu_vs_torch: {binary} not found: build it first (cmake --build {args.build} --target cpu_linear)")
    threads = sorted({int(t) for t in args.threads.split(",")})
    with open("/proc/cpuinfo") as f:
        model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "unknown CPU")
    print(f"cpu_vs_torch: {model}, {os.cpu_count()} hardware threads; medians of {args.repeats} calls "
          f"after a warm-up; Kiln and PyTorch alternate per thread count")
    rows = []  # (name, threads, Kiln's medians, PyTorch's medians), one median per round
    for n in threads:
        kiln_rounds, torch_rounds = [], []
        for _ in range(args.rounds):  # a slow spell of the machine then shows as one round's outlier
            kiln_rounds.append([run_kiln(binary, w["kiln"], n, args.repeats) for w in WORKLOADS])
            torch = run_torch(args.torch_python, n, args.repeats)
            torch_rounds.append(torch["medians_ms"])
        if n == threads[0]:
            print(f"PyTorch {torch['version']}, BLAS loaded: {', '.join(torch['blas']) or 'none found'}")
            if any("/blas/libblas" in b for b in torch["blas"]):
                print("WARNING: torch runs on Debian's reference BLAS (install libopenblas-dev for a fair comparison)")
        for i, w in enumerate(WORKLOADS):
            rows.append((w["name"], n, [r[i] for r in kiln_rounds], [r[i] for r in torch_rounds]))
        if args.fashion_mnist:
            k, t = fashion_mnist_epoch_s(args.build, args.torch_python, args.fashion_mnist, args.fm_epochs, n)
            rows.append(("Fashion-MNIST epoch (ms per epoch)", n, [k * 1e3], [t * 1e3]))
    spread = args.rounds > 1
    print(f"\n{'workload':<34} {'threads':>7} {'Kiln ms':>10} {'PyTorch ms':>11} {'Kiln/PyTorch':>13}"
          + ("   Kiln range, PyTorch range (ms)" if spread else ""))
    for name, n, k, t in rows:
        km, tm = statistics.median(k), statistics.median(t)
        ranges = f"   {min(k):.3f}-{max(k):.3f}, {min(t):.3f}-{max(t):.3f}" if spread and len(k) > 1 else ""
        print(f"{name:<34} {n:>7} {km:>10.3f} {tm:>11.3f} {km / tm:>12.2f}x{ranges}")
    if not args.no_grids:
        print_grids(binary, threads[-1], args.repeats)


if __name__ == "__main__":
    main()
