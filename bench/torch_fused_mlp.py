#!/usr/bin/env python3
"""PyTorch's side of examples/fused_mlp.cpp and bench/fused_linear_gelu.cpp, timed the same
way in the same run: CUDA events around each call, 20 warm-up calls, median of 200.

Rows (fp32, TF32, bf16):
  linear+GELU at (M, K, N) = (64,1024,4096), (4096,1024,4096), (8192,4096,16384), timed as
  bench/fused_linear_gelu.cpp times them (device time per call: one pass over the weight sets
  queued behind a ~5 ms spin kernel (bench/torch_timing.py), median of 51 passes; at least 4 weight sets and enough to
  fill twice the L2, so no call finds its weight in L2): linear alone, linear then gelu (exact),
  torch._addmm_activation(use_gelu=True) (cuBLASLt's GELU epilogue: tanh GELU);
  the MLP block 1024 -> 4096 (GELU) -> 1024 at batch 64 and 4096: eager, a
  torch.cuda.CUDAGraph replay (the input copied into the static buffer first, as Kiln's
  executable does), and with --compile torch.compile (default and max-autotune).
With --compile the linear+GELU rows also get torch.compile'd F.gelu(F.linear(x, w, b)) per mode;
there "max-autotune" runs as "max-autotune-no-cudagraphs", since the rotated weights are graph
inputs whose addresses change every call (a CUDA graph would copy each into a static buffer);
the MLP block's weights are parameters, so its max-autotune row keeps CUDA graphs.

    python3 bench/torch_fused_mlp.py [--compile [--compile-modes default,max-autotune]]
                                     [--precisions float32,tf32,bfloat16] [--csv]
"""
import argparse
import sys
import statistics

import torch
import torch.nn.functional as F

from torch_timing import device_ms_per_call

SHAPES = ((64, 1024, 4096), (4096, 1024, 4096), (8192, 4096, 16384))
BATCHES = (64, 4096)


def median_us(fn, warmup=20, iters=200):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends))


def set_precision(name):
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    return torch.bfloat16 if name == "bfloat16" else torch.float32


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--compile-modes", default="default,max-autotune")
    ap.add_argument("--precisions", default="float32,tf32,bfloat16")
    ap.add_argument("--csv", action="store_true")
    args = ap.parse_args()
    dev = torch.device("cuda")
    rows = []

    def add(row):
        # Each row also goes to stderr at once, so a run cut short by a time limit keeps them.
        rows.append(row)
        print("row", *row, file=sys.stderr, flush=True)

    torch.manual_seed(0)
    for prec in args.precisions.split(","):
        dtype = set_precision(prec)
        for (m, k, n) in SHAPES:
            x = torch.randn(m, k, device=dev, dtype=dtype)
            l2 = torch.cuda.get_device_properties(0).L2_cache_size
            sets = max(4, -(-2 * l2 // (n * k * x.element_size())))
            ws = [torch.randn(n, k, device=dev, dtype=dtype) / k**0.5 for _ in range(sets)]
            bs = [torch.randn(n, device=dev, dtype=dtype) for _ in range(sets)]
            it = [0]

            def nxt():
                it[0] = (it[0] + 1) % sets
                return ws[it[0]], bs[it[0]]

            def lin():
                w, b = nxt()
                return F.linear(x, w, b)

            def lin_gelu():
                w, b = nxt()
                return F.gelu(F.linear(x, w, b))

            def addmm_act():
                w, b = nxt()
                return torch._addmm_activation(b, x, w.t(), use_gelu=True)

            variants = [("linear", lin), ("linear+gelu", lin_gelu), ("_addmm_activation(tanh)", addmm_act)]
            if args.compile:
                for mode in args.compile_modes.split(","):
                    torch._dynamo.reset()
                    inductor_mode = "max-autotune-no-cudagraphs" if mode == "max-autotune" else mode
                    cf = torch.compile(lambda x_, w_, b_: F.gelu(F.linear(x_, w_, b_)), mode=inductor_mode)

                    def compiled(cf=cf):
                        w, b = nxt()
                        return cf(x, w, b)

                    variants.append((f"compile {inductor_mode}", compiled))
            for name, fn in variants:
                us = 1e3 * device_ms_per_call(fn, sets, repeats=51, warmup=3)
                add(("linear_gelu", prec, f"{m}x{k}x{n}", name, us, 2.0 * m * n * k / us / 1e6))
            del x, ws, bs
        for batch in BATCHES:
            mlp = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024))
            mlp = mlp.to(dev, dtype).eval()
            x = torch.randn(batch, 1024, device=dev, dtype=dtype)
            with torch.no_grad():
                add(("mlp", prec, f"batch {batch}", "eager", median_us(lambda: mlp(x)), 0.0))
                static_x = x.clone()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        mlp(static_x)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    static_y = mlp(static_x)

                def replay():
                    static_x.copy_(x)
                    g.replay()
                    return static_y

                add(("mlp", prec, f"batch {batch}", "cuda graph", median_us(replay), 0.0))
                if args.compile:
                    for mode in args.compile_modes.split(","):
                        torch._dynamo.reset()
                        c = torch.compile(mlp, mode=mode)
                        add(("mlp", prec, f"batch {batch}", f"compile {mode}", median_us(lambda: c(x)), 0.0))
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.csv:
        print("kind,precision,shape,variant,us,tflops")
        for r in rows:
            print(",".join(str(v) for v in r))
    else:
        print(f"PyTorch {torch.__version__} on {torch.cuda.get_device_name(0)}")
        for r in rows:
            print(f"{r[0]:<12} {r[1]:<9} {r[2]:<18} {r[3]:<26} {r[4]:10.1f} us {r[5]:8.1f} TFLOP/s")


if __name__ == "__main__":
    main()
