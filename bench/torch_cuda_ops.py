#!/usr/bin/env python3
"""PyTorch's side of bench/cuda_bandwidth.cpp and bench/cuda_gemm.cpp, timed the same way:
a ~5 ms spin kernel (torch.cuda._sleep) lets the host queue the calls, CUDA events around
`iters` calls, GPU ms per call, median of 9 repeats after 3 warm-up calls.

    python3 bench/torch_cuda_ops.py
"""
import torch

from torch_timing import device_ms_per_call as median_gpu_ms


def bandwidth():
    n, row = 1 << 28, 4096
    print(f"torch bandwidth: {n} elements, {torch.cuda.get_device_name(0)}, PyTorch {torch.__version__}")
    for dt, name in ((torch.float32, "float32"), (torch.bfloat16, "bfloat16")):
        torch.manual_seed(0)
        a = torch.randn(n, device="cuda", dtype=dt)
        b = torch.randn(n, device="cuda", dtype=dt)
        c = torch.empty_like(a)
        rows = a.view(n // row, row)
        bytes1 = n * a.element_size()
        copy_ms = median_gpu_ms(lambda: c.copy_(a), 10)
        copy_gbs = 2 * bytes1 / copy_ms / 1e6
        print(f"RESULT torch_copy_{name}_gbs {copy_gbs:.1f}")
        ops = (("add", 3, lambda: torch.add(a, b)), ("gelu", 2, lambda: torch.nn.functional.gelu(a)),
               ("sum", 1, lambda: torch.sum(a)), ("softmax", 2, lambda: torch.softmax(rows, -1)))
        for op, k, f in ops:
            ms = median_gpu_ms(f, 10)
            gbs = k * bytes1 / ms / 1e6
            print(f"{op + ' ' + name:<24} {ms:10.3f} {gbs:12.1f} {100 * gbs / copy_gbs:11.1f}%")
            print(f"RESULT torch_{op}_{name}_gbs {gbs:.1f}")


def gemm():
    print(f"torch gemm: nn.Linear(K, N) on x [M, K], {torch.cuda.get_device_name(0)}")
    shapes = ((64, 1024, 4096), (4096, 1024, 4096), (8192, 4096, 16384))
    for mode in ("float32", "tf32", "bfloat16"):
        dt = torch.bfloat16 if mode == "bfloat16" else torch.float32
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        for m, k, n in shapes:
            torch.manual_seed(0)
            lin = torch.nn.Linear(k, n, device="cuda", dtype=dt)
            x = torch.randn(m, k, device="cuda", dtype=dt)
            flops = 2.0 * m * n * k
            rough_ms = flops / (50e9 if mode == "float32" else 400e9)
            iters = int(min(max(20.0 / rough_ms, 5), 200))
            with torch.no_grad():
                ms = median_gpu_ms(lambda: lin(x), iters)
            tflops = flops / ms / 1e9
            print(f"{mode:<8} {f'{m}x{k}x{n}':>20} {ms:10.4f} {tflops:10.1f}")
            print(f"RESULT torch_gemm_{mode}_{m}x{k}x{n}_tflops {tflops:.2f}")
    torch.backends.cuda.matmul.allow_tf32 = False


if __name__ == "__main__":
    bandwidth()
    gemm()
